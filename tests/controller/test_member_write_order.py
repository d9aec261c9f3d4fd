"""A step that takes a task from one member and gives it to another at the next epoch writes the
member giving it up first (controller/reconcile.py, `_write_member_specs`): written side by side, a
reader could find the new owner's target while the old one's still named the task active at the older
epoch — what the chaos observer caught after a lost member's tasks were restored elsewhere. A lost
member is written only at the version the plan saw, and while a process of it may still run an older
target, the new owner is not told (`controller.handover`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from test_controller_core import MODEL

from streamapp.controller import children
from streamapp.controller.observe import PodState
from streamapp.controller.reconcile import _write_member_specs
from streamapp.rebalance import Assignment, member_targets
from streamapp.rebalance.model import TaskAssignment


@dataclass
class RecordingKube:
    """Member spec patches in the order they were made; `refuse` fails the patch of that member."""

    patched: list[str] = field(default_factory=list)
    uids: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)
    refuse: str | None = None

    def patch_member_spec(
        self, namespace: str, name: str, spec: dict[str, Any], *, uid: str, version: str | None = None
    ) -> None:
        if name == self.refuse:
            raise ApiException(status=500, reason="refused")
        self.patched.append(name)
        self.uids[name] = uid
        self.versions[name] = version

    def create_member(self, namespace: str, body: dict[str, Any]) -> None:
        self.patched.append(body["metadata"]["name"])


def members_of(assignment: Assignment) -> list[dict[str, Any]]:
    """Every member's object as the previous step wrote it."""
    bodies = []
    for member, target in sorted(member_targets(assignment).items()):
        spec = children.member_spec("counts", member, target, assignment.generation, False, ())
        body = children.member_object(MODEL, member, spec)
        body["metadata"]["uid"] = f"uid-of-{body['metadata']['name']}"
        body["metadata"]["resourceVersion"] = f"{700 + member}"
        bodies.append(body)
    return bodies


BEFORE = Assignment(
    generation=4,
    tasks=(
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=1, epoch=1),
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=1, epoch=1),
    ),
)
# member 1 is lost: its task 1 is restored on member 0 at epoch 2, member 1 keeps a standby copy
AFTER = Assignment(
    generation=5,
    tasks=(
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=0, epoch=2, standbys=(1,)),
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=1, epoch=1),
    ),
)


def test_the_member_giving_a_task_up_is_written_before_the_one_taking_it() -> None:
    for _ in range(20):  # the writes of one wave run on threads: order within it is not fixed
        kube = RecordingKube()
        plan = SimpleNamespace(assignment=AFTER)
        _write_member_specs(kube, MODEL, plan, members_of(BEFORE), frozenset())  # type: ignore[arg-type]
        assert kube.patched == ["counts-1", "counts-0"]


def test_when_giving_up_fails_the_new_epoch_is_not_written() -> None:
    kube = RecordingKube(refuse="counts-1")
    plan = SimpleNamespace(assignment=AFTER)
    with pytest.raises(ApiException):
        _write_member_specs(kube, MODEL, plan, members_of(BEFORE), frozenset())  # type: ignore[arg-type]
    assert kube.patched == []


def test_a_member_spec_is_patched_only_on_the_member_object_observed() -> None:
    """Each patch names the UID of the StreamAppMember the watch showed: one re-created under its
    name by someone else since is not written (kube.patch_member_spec's condition)."""
    kube = RecordingKube()
    _write_member_specs(kube, MODEL, SimpleNamespace(assignment=AFTER), members_of(BEFORE), frozenset())  # type: ignore[arg-type]
    assert kube.uids == {"counts-0": "uid-of-counts-0", "counts-1": "uid-of-counts-1"}


def test_a_giver_the_watch_shows_as_already_written_is_still_written_first() -> None:
    """The watch can lag behind the operator's own writes (a new leader's cache): it shows member 1
    without task 1 while its stored target still names it active at epoch 1. Judged from the plan's
    previous assignment, member 1 gives it up: written first, not skipped as unchanged."""
    lagging = [m for m in members_of(AFTER) if m["spec"]["memberId"] == 1] + [
        m for m in members_of(BEFORE) if m["spec"]["memberId"] == 0
    ]
    for _ in range(20):
        kube = RecordingKube()
        plan = SimpleNamespace(assignment=AFTER)
        _write_member_specs(kube, MODEL, plan, lagging, frozenset(), previous=BEFORE)  # type: ignore[arg-type]
        assert kube.patched == ["counts-1", "counts-0"]


NOW = 1_800_000_000.0


def stamp(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def restarting(started: float | None = NOW - 30, finished: float | None = None) -> dict[int, PodState]:
    """Member 0 Ready; member 1's pod not Ready, its executor container running since `started` (or,
    with None, not running, its last run ended at `finished`)."""
    return {
        0: PodState(member=0, name="counts-0", uid="pod-0", ready=True, terminating=False, node="n"),
        1: PodState(
            member=1,
            name="counts-1",
            uid="pod-1",
            ready=False,
            terminating=False,
            node="n",
            executor_started=started,
            executor_finished=finished,
        ),
    }


def reported(bodies: list[dict[str, Any]], generation: int, started: float) -> list[dict[str, Any]]:
    """`bodies` with member 1's report: generation acknowledged by a process of pod-1 started then."""
    for body in bodies:
        if body["spec"]["memberId"] == 1:
            body["status"] = {
                "observedGeneration": generation,
                "podUID": "pod-1",
                "startedAt": stamp(started),
                "reportedAt": stamp(NOW - 1),
            }
    return bodies


def write(
    kube: RecordingKube,
    bodies: list[dict[str, Any]],
    pods: dict[int, PodState],
    previous: Assignment = BEFORE,
) -> tuple[int, ...]:
    plan = SimpleNamespace(assignment=AFTER)
    return _write_member_specs(kube, MODEL, plan, bodies, frozenset(), previous=previous, pods=pods, now=NOW)  # type: ignore[arg-type]


def test_a_lost_member_is_written_only_at_the_version_the_plan_saw() -> None:
    kube = RecordingKube()
    assert write(kube, members_of(BEFORE), restarting()) == ()
    assert kube.patched == ["counts-1", "counts-0"]
    assert kube.versions == {"counts-1": "701", "counts-0": None}


def test_the_new_owner_waits_while_the_lost_members_restarted_process_may_run_the_task() -> None:
    """Member 1's executor restarted in place (its pod not Ready yet) and acknowledged the target
    that names task 1 active: it may run it, so member 0 is not given task 1 until it let go."""
    kube = RecordingKube()
    assert write(kube, reported(members_of(BEFORE), 4, NOW - 20), restarting()) == (1,)
    assert kube.patched == ["counts-1"]
    lost = [m for m in members_of(AFTER) if m["spec"]["memberId"] == 1]
    waiting = reported(lost, 4, NOW - 20) + [m for m in members_of(BEFORE) if m["spec"]["memberId"] == 0]
    kube = RecordingKube()
    assert write(kube, waiting, restarting()) == (1,), "written, not yet acknowledged"
    assert "counts-0" not in kube.patched
    kube = RecordingKube()
    assert write(kube, waiting, restarting(), previous=AFTER) == (1,), (
        "the plan already made, the giver unchanged"
    )
    assert kube.patched == []
    kube = RecordingKube()
    acknowledged = reported(lost, 5, NOW - 20) + [m for m in members_of(BEFORE) if m["spec"]["memberId"] == 0]
    assert write(kube, acknowledged, restarting()) == ()
    assert kube.patched == ["counts-1", "counts-0"], "the giver as the previous step wrote it, first"


def test_a_report_from_a_process_that_ended_or_from_before_the_restart_holds_nothing_up() -> None:
    for pods, started in (
        (restarting(started=NOW - 30), NOW - 60),  # made before the container's current run
        (restarting(started=None, finished=NOW - 10), NOW - 20),  # its run ended after it started
    ):
        kube = RecordingKube()
        assert write(kube, reported(members_of(BEFORE), 4, started), pods) == ()
        assert kube.patched == ["counts-1", "counts-0"]
    kube = RecordingKube()
    stale = reported(members_of(BEFORE), 4, NOW - 20)
    stale[1]["status"]["reportedAt"] = stamp(NOW - 600)  # deaf to the API server for long
    assert write(kube, stale, restarting()) == ()
