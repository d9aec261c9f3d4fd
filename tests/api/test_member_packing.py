"""A member's target and report fit in one etcd object at 100,000 tasks on one member (api/member.py).

In list form a target costs ~27 bytes a task (2.7 MB for 100,000 tasks on one member, over etcd's
1.5 MiB request limit) and a report ~170 bytes a copy. Past `LIST_FORM_BYTES` the operator writes the
target packed (`pack_tasks`), past `REPORT_LIST_BYTES` the executor its report (`pack_report`); both
read back through the one model, whichever form was written.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.api.fields import ValidationError
from streamapp.api.member import (
    LIST_FORM_BYTES,
    MAX_EPOCH,
    MAX_PACKED_CHARS,
    REPORT_LIST_BYTES,
    ROLES,
    RevokingTask,
    StreamAppMemberSpec,
    StreamAppMemberStatus,
    TargetTooLarge,
    TaskReport,
    pack_report,
    pack_tasks,
    significant,
    unpack_report,
)
from streamapp.controller import children, intentrebuild
from streamapp.controller.observe import member_views
from streamapp.rebalance import MemberTarget

TASKS = 100_000
# The bound the packed target of 100,000 tasks on one member stays under, whatever their roles and
# with epochs below 2^20 (a million takeovers of every task; an app's epochs grow by one a takeover):
# ~0.5 MB measured for a random split into active and revoking with every epoch a different random
# number, ~1 kB for a planned app. A third of etcd's 1.5 MiB, and with the report's bound below, spec
# and status together stay under it.
PACKED_BOUND = 576_000
EPOCH_BITS = 20

epochs = st.integers(min_value=0, max_value=MAX_EPOCH)
task_sets = st.sets(st.integers(min_value=0, max_value=2_000), max_size=60)


@st.composite
def targets(draw: st.DrawFn) -> StreamAppMemberSpec:
    """Any target: disjoint roles (a member holds a task once), any epochs, revocations with or
    without `since`."""
    tasks = sorted(draw(task_sets))
    roles = [draw(st.sampled_from(ROLES)) for _ in tasks]
    active = {t: draw(epochs) for t, r in zip(tasks, roles, strict=True) if r == "active"}
    revoking = {t: draw(epochs) for t, r in zip(tasks, roles, strict=True) if r == "revoking"}
    spec = StreamAppMemberSpec.of(
        "counts",
        draw(st.integers(min_value=0, max_value=999)),
        draw(st.integers(min_value=0, max_value=MAX_EPOCH)),
        active,
        revoking,
        [t for t, r in zip(tasks, roles, strict=True) if r == "standby"],
        [t for t, r in zip(tasks, roles, strict=True) if r == "warmup"],
        draw(st.booleans()),
        draw(st.lists(st.integers(min_value=1, max_value=10**9), max_size=2)),
    )
    dated = draw(st.sets(st.sampled_from(sorted(revoking)), max_size=3)) if revoking else set()
    stamped = tuple(
        RevokingTask(task=t.task, epoch=t.epoch, since="2026-01-01T00:00:00Z" if t.task in dated else None)
        for t in spec.revoking
    )
    return StreamAppMemberSpec(**{**spec.__dict__, "revoking": stamped})


def packed_wire(spec: StreamAppMemberSpec) -> dict[str, object]:
    """The packed form `wire` writes for a target too large for lists, for a target of any size."""
    listed = spec.to_dict()
    return {
        **listed,
        "active": [],
        "revoking": [t.to_dict() for t in spec.revoking if t.since is not None],
        "standby": [],
        "warmup": [],
        "packed": pack_tasks(
            ((t.task, t.epoch) for t in spec.active),
            ((t.task, t.epoch) for t in spec.revoking if t.since is None),
            spec.standby,
            spec.warmup,
        ),
    }


@given(targets())
def test_any_target_survives_packing(spec: StreamAppMemberSpec) -> None:
    wire = packed_wire(spec)
    assert StreamAppMemberSpec.from_dict(wire) == spec
    # through JSON, as the executor and `controller.intentrebuild` read it from the API server
    assert StreamAppMemberSpec.from_dict(json.loads(json.dumps(wire))) == spec
    assert children.same_target(wire, spec.to_dict())


@given(targets())
def test_a_target_that_fits_as_lists_is_written_as_before(spec: StreamAppMemberSpec) -> None:
    """Byte for byte what the previous operator wrote: executors of the previous version read it."""
    assert spec.wire() == spec.to_dict() and "packed" not in spec.wire()


@st.composite
def large_targets(draw: st.DrawFn) -> StreamAppMemberSpec:
    """100,000 tasks on one member, split among the roles by drawn weights, with drawn epochs: the
    scale-in of every task to one survivor, a member holding all its copies, and anything between."""
    rng = random.Random(draw(st.integers(min_value=0, max_value=2**32)))
    weights = [draw(st.integers(min_value=0, max_value=4)) for _ in ROLES]
    weights[0] = weights[0] or 1
    spread = draw(st.sampled_from([0, 1, 2**EPOCH_BITS - 1]))
    base = draw(st.integers(min_value=1, max_value=2**EPOCH_BITS))
    roles = rng.choices(ROLES, weights=weights, k=TASKS)
    return StreamAppMemberSpec.of(
        "counts",
        0,
        9,
        {t: base + rng.randint(0, spread) for t in range(TASKS) if roles[t] == "active"},
        {t: base + rng.randint(0, spread) for t in range(TASKS) if roles[t] == "revoking"},
        [t for t in range(TASKS) if roles[t] == "standby"],
        [t for t in range(TASKS) if roles[t] == "warmup"],
    )


@settings(max_examples=6, deadline=None)
@given(large_targets())
def test_100000_tasks_on_one_member_fit_in_a_fraction_of_etcds_limit(spec: StreamAppMemberSpec) -> None:
    wire = spec.wire()
    assert ("packed" in wire) == (len(json.dumps(spec.to_dict(), separators=(",", ":"))) > LIST_FORM_BYTES)
    size = len(json.dumps(wire, separators=(",", ":")))
    assert size < PACKED_BOUND, size
    assert StreamAppMemberSpec.from_dict(wire) == spec


def test_the_scale_in_of_every_task_to_one_member_is_written_whole() -> None:
    """The hole: two members → one, the survivor keeps its half and takes the other's at the next
    epoch. Its spec was ~2.7 MB; now each member's spec, read back the way recovery and the executor
    read it, gives every task an owner."""
    survivor = MemberTarget({t: 3 if t % 2 else 2 for t in range(TASKS)}, {}, (), ())
    spec = children.member_spec("counts", 0, survivor, 12, False, ())
    assert len(json.dumps(spec)) < PACKED_BOUND // 100  # a planned app: a few kB
    body = {"spec": spec}
    rebuilt = intentrebuild.intent_from_members([body], TASKS)
    assert all(t.active == 0 for t in rebuilt.tasks)
    assert [t.epoch for t in rebuilt.tasks[:4]] == [2, 3, 2, 3]


def test_a_target_too_large_even_packed_is_refused_naming_the_limit() -> None:
    rng = random.Random(7)
    spec = StreamAppMemberSpec.of(
        "counts", 3, 1, {t: rng.randrange(MAX_EPOCH) for t in range(TASKS)}, {}, (), ()
    )
    with pytest.raises(TargetTooLarge, match=f"member 3's target .* over the {MAX_PACKED_CHARS}"):
        spec.wire()


@pytest.mark.parametrize(
    "packed",
    [
        "not base64!",
        "eJwrSS0uAQAEXQHB",  # deflated "test"
        pack_tasks([], [], [], []) + "A",
        __import__("base64").b64encode(__import__("zlib").compress(b"0:1\n\n\n")).decode(),  # a gap of 0
        __import__("base64").b64encode(__import__("zlib").compress(b"1\n\n\n")).decode(),  # active, no epoch
    ],
)
def test_a_damaged_packed_target_does_not_parse(packed: str) -> None:
    with pytest.raises(ValidationError, match=r"spec\.packed"):
        StreamAppMemberSpec.from_dict({"app": "counts", "memberId": 0, "packed": packed})


def test_packed_tasks_named_again_in_a_list_are_refused() -> None:
    wire = {"app": "counts", "memberId": 0, "standby": [4], "packed": pack_tasks([], [], [4], [])}
    with pytest.raises(ValidationError, match="standby tasks the standby list names too"):
        StreamAppMemberSpec.from_dict(wire)


figures = st.none() | st.integers(min_value=0, max_value=10**12)


@st.composite
def reports(draw: st.DrawFn) -> tuple[TaskReport, ...]:
    tasks = sorted(draw(task_sets))
    return tuple(
        TaskReport(
            task=t,
            role=draw(st.sampled_from(ROLES)),
            epoch=draw(st.none() | st.integers(min_value=0, max_value=50)),
            lag=draw(figures),
            restore_rows=draw(figures),
            input_lag=draw(figures),
            applied_offset=draw(figures),
            store_epoch=draw(st.none() | st.integers(min_value=0, max_value=60)),
            fenced_by=draw(st.none() | st.integers(min_value=0, max_value=60)),
            resumed_by=draw(st.none() | st.sampled_from(["restart", "handoff", "cold"])),
            resumed_after=draw(st.none() | st.floats(min_value=0, max_value=1e6)),
        )
        for t in tasks
    )


@given(reports())
def test_a_packed_report_keeps_every_copy_and_what_the_operator_acts_on(rows: tuple[TaskReport, ...]) -> None:
    packed, whole = pack_report(rows)
    status = StreamAppMemberStatus.from_dict(
        json.loads(json.dumps({"tasks": [t.to_dict() for t in whole], "packed": packed}))
    )
    read = {(t.task, t.role): t for t in status.tasks}
    assert set(read) == {(t.task, t.role) for t in rows}
    for row in rows:
        got = read[(row.task, row.role)]
        if got == row:
            continue  # listed whole
        assert (got.lag, got.restore_rows, got.input_lag) == tuple(
            significant(v) for v in (row.lag, row.restore_rows, row.input_lag)
        )
        ahead = row.role in ("active", "revoking") and (row.store_epoch or 0) > (row.epoch or 0)
        assert row.fenced_by is None and row.resumed_by is None and not ahead, "a row the operator acts on"
    assert len(unpack_report(packed, "status.packed")) == len(rows)


@given(st.integers(min_value=0, max_value=10**15), st.integers(min_value=0, max_value=10**15))
def test_rounding_never_makes_a_copy_look_more_caught_up(value: int, threshold: int) -> None:
    rounded = significant(value)
    assert rounded is not None and value <= rounded <= value + value // 10 + 1
    assert rounded > threshold or value <= threshold


def test_a_report_of_100000_copies_fits_and_the_operator_reads_it() -> None:
    """The executor's write path (`merge_patch`) and the operator's read path (`member_views`) for a
    member holding 100,000 tasks, every figure different, a few fenced: under `REPORT_LIST_BYTES`,
    the fenced tasks and store epochs intact, lags at most rounded up."""
    rng = random.Random(11)
    rows = tuple(
        TaskReport(
            task=t,
            role="active" if t % 4 else "standby",
            epoch=5 if t % 4 else None,
            applied_seq=rng.randrange(10**6),
            applied_offset=rng.randrange(10**12),
            lag=0 if t % 4 else rng.randrange(10**6),
            input_lag=rng.randrange(10**5) if t % 4 else None,
            restore_rows=rng.randrange(10**8) if t % 4 else None,
            store_epoch=(9 if t % 1000 == 1 else 5) if t % 4 else 5,
            fenced_by=9 if t % 1000 == 1 else None,
            resumed_by="restart" if t % 4 else None,
            resumed_after=rng.random() * 30 if t % 4 else None,
        )
        for t in range(TASKS)
    )
    status = StreamAppMemberStatus(observed_generation=4, pod_uid="pod", tasks=rows).merge_patch()["status"]
    assert len(json.dumps(status, separators=(",", ":"))) <= REPORT_LIST_BYTES + 1_000
    assert status["packed"]
    pod = {
        "metadata": {"name": "counts-0", "uid": "pod", "labels": {"streamapp.dev/member": "0"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    [view] = member_views(
        [pod], [{"spec": {"memberId": 0, "generation": 4}, "status": json.loads(json.dumps(status))}], {}, 1
    )
    assert view.acked_generation == 4
    assert view.fenced == {t for t in range(TASKS) if t % 1000 == 1}
    assert {t: e for t, e in view.store_epochs.items() if e > 5} == dict.fromkeys(view.fenced, 9)
    assert all(row.lag is not None and row.lag <= view.lags[row.task] for row in rows)
