"""A reconcile costs what changed: the memo reuses parsed reports, the last plan and rendered member
specs only when recomputing them could not give anything else; the member writes of a step go out
side by side."""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from kubernetes.client.exceptions import ApiException
from test_controller_core import APP, MODEL
from test_invariants import events, run, setups
from world import World

from streamapp.api.member import StreamAppMemberSpec
from streamapp.controller import children, intentrebuild, supporting
from streamapp.controller.memo import Memo
from streamapp.controller.metrics import Metrics
from streamapp.controller.observe import Observed
from streamapp.controller.reconcile import reconcile, side_by_side
from streamapp.rebalance import AppConfig, Assignment, MemberView, Plan, member_targets, plan


@dataclass
class CountingPlanner:
    """The engine's `plan`, counting its calls."""

    calls: int = 0

    def __call__(
        self, config: AppConfig, views: Sequence[MemberView], previous: Assignment, now: float
    ) -> Plan:
        self.calls += 1
        return plan(config, views, previous, now)


@dataclass
class RecordingKube:
    """Takes every write; the app's status patches are merged into the app it returns."""

    app: dict[str, Any]
    writes: list[tuple[str, Any]] = field(default_factory=list)

    def patch_app_status(
        self, namespace: str, name: str, status: dict[str, Any], *rest: Any
    ) -> dict[str, Any]:
        self.writes.append(("patch_app_status", status))
        self.app = {**self.app, "status": {**(self.app.get("status") or {}), **status}}
        return self.app

    def __getattr__(self, name: str) -> Any:
        def write(*args: Any, **kwargs: Any) -> None:
            self.writes.append((name, args))

        return write


def ready_pod(member: int) -> dict[str, Any]:
    body = children.pod(MODEL, member)
    body["metadata"]["uid"] = f"pod-{member}"
    body["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return body


def reporting(assignment: Assignment, version: int, input_lag: int = 0) -> tuple[dict[str, Any], ...]:
    """Every member has applied `assignment` and reports its tasks processed, as object version
    `version` (the API server's resourceVersion changes with every write)."""
    bodies = []
    thresholds = MODEL.spec.app_config().rebalance.lag_thresholds()
    for member, target in sorted(member_targets(assignment).items()):
        spec = children.member_spec("counts", member, target, assignment.generation, False, thresholds)
        body = children.member_object(MODEL, member, spec)
        body["metadata"]["resourceVersion"] = f"{version}-{member}"
        tasks = [
            {"task": t, "role": "active", "epoch": e, "lag": 0, "inputLag": input_lag}
            for t, e in target.active.items()
        ]
        tasks += [{"task": t, "role": "standby", "lag": 0} for t in target.standby]
        body["status"] = {
            "observedGeneration": assignment.generation,
            "podUID": f"pod-{member}",
            "tasks": tasks,
        }
        bodies.append(body)
    return tuple(bodies)


def settled_app() -> tuple[RecordingKube, Observed, Memo, CountingPlanner]:
    """An app whose members have applied and reported its plan, reconciled until nothing changes."""
    app = copy.deepcopy(APP)
    app["metadata"]["resourceVersion"] = "1"
    app["spec"]["rebalance"] = {"standbyReplicas": 1}
    kube, planner = RecordingKube(app), CountingPlanner()
    memo = Memo(planner=planner)
    observed = Observed(
        app=app,
        pods=(ready_pod(0), ready_pod(1)),
        members=(),
        zones={},
        supporting=tuple(supporting.wanted(MODEL, range(2))),
    )
    for version in range(1, 6):
        reconcile(kube, observed, 10.0 + version, Metrics(), memo=memo)  # type: ignore[arg-type]
        assignment = memo.planned.result.assignment if memo.planned else Assignment()
        observed = replace(observed, app=kube.app, members=reporting(assignment, version))
    reconcile(kube, observed, 20.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    kube.writes.clear()
    planner.calls = 0
    return kube, observed, memo, planner


def test_reports_that_change_no_input_of_the_engine_reuse_its_plan_and_write_only_the_aggregate() -> None:
    kube, observed, memo, planner = settled_app()
    assert memo.planned is not None and not memo.planned.result.changed
    assignment = memo.planned.result.assignment
    reported = replace(observed, members=reporting(assignment, 100, input_lag=7))
    reconcile(kube, reported, 21.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    assert planner.calls == 0, "only input lags changed: the engine's answer cannot differ"
    assert kube.writes == [("patch_app_status", {"inputLag": 7 * 4})]
    kube.writes.clear()
    reported = replace(reported, app=kube.app)  # as the loop keeps it: the app as last written
    reconcile(kube, reported, 22.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    assert (planner.calls, kube.writes) == (0, []), "the same reports again: nothing to compute or write"


def test_a_changed_copy_lag_a_lost_pod_or_a_deadline_plans_again() -> None:
    kube, observed, memo, planner = settled_app()
    assignment = memo.planned.result.assignment if memo.planned else Assignment()
    behind = reporting(assignment, 100)
    status = behind[0]["status"]
    standby = next(t for t in status["tasks"] if t["role"] == "standby")
    standby["lag"] = 50_000
    reconcile(kube, replace(observed, members=behind), 21.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    assert planner.calls == 1, "a copy's lag is an input of the engine"

    lost = replace(observed, pods=(ready_pod(0),))
    result = reconcile(kube, lost, 22.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    assert planner.calls == 2
    assert result.wake_at is not None, "the lost member's tasks are held until a deadline"
    reconcile(kube, lost, 23.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    reconcile(kube, lost, 24.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    calls = planner.calls
    reconcile(kube, lost, result.wake_at, Metrics(), memo=memo)  # type: ignore[arg-type]
    assert planner.calls == calls + 1, "at its wake-up time a plan is computed again"


def test_a_report_is_parsed_again_when_its_object_changed_and_never_served_stale() -> None:
    _, observed, memo, _ = settled_app()
    parse = memo.parse_reports(observed.members)
    first = observed.members[0]
    assert parse(first).observed_generation == first["status"]["observedGeneration"]
    newer = copy.deepcopy(first)
    newer["metadata"]["resourceVersion"] = "999"
    newer["spec"]["generation"] = newer["status"]["observedGeneration"] = 99
    assert parse(newer).observed_generation == 99, "a version the memo has not seen is parsed"
    parse = memo.parse_reports([newer])
    assert parse(newer).observed_generation == 99
    assert set(memo.reports) == {newer["metadata"]["name"]}, "members no longer listed are forgotten"
    assert memo.digest(newer).acknowledged == 99
    again = copy.deepcopy(newer)
    again["metadata"]["resourceVersion"] = "1000"
    again["spec"]["generation"] = again["status"]["observedGeneration"] = 100
    assert memo.digest(again).acknowledged == 100, "a digest is of the version asked for"


def test_a_member_spec_is_rendered_again_when_its_target_changes() -> None:
    memo = Memo()
    owners = plan(AppConfig(4, 2), [MemberView(0), MemberView(1)], Assignment(), 0.0).assignment
    targets = member_targets(owners)
    first = memo.member_spec("counts", 0, targets[0], 1, False, ())
    assert memo.member_spec("counts", 0, targets[0], 2, False, ()) == {**first, "generation": 2}
    assert memo.member_spec("counts", 0, targets[0], 2, True, ())["retiring"] is True
    moved = member_targets(plan(AppConfig(4, 1), [MemberView(0)], Assignment(), 0.0).assignment)[0]
    assert memo.member_spec("counts", 0, moved, 3, False, ()) == children.member_spec(
        "counts", 0, moved, 3, False, ()
    )


def test_member_specs_carry_the_apps_lag_thresholds_and_are_rewritten_when_they_change() -> None:
    """The executor must know which copy lags the engine acts on (`handoffLag`,
    `acceptableRecoveryLag`) to report a copy reaching one at once; 0 goes without saying."""
    kube, observed, memo, _ = settled_app()
    assert not [w for w in kube.writes if w[0] == "patch_member_spec"]
    app = copy.deepcopy(kube.app)
    app["spec"]["rebalance"].update(handoffLag=100, acceptableRecoveryLag=0)
    reconcile(kube, replace(observed, app=app), 21.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    written = [args[2] for name, args in kube.writes if name == "patch_member_spec"]
    assert len(written) == 2 and all(spec["lagThresholds"] == [100] for spec in written)
    assert StreamAppMemberSpec.from_dict(written[0]).caught_up_at() == (0, 100)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), events)
def test_the_memo_answers_what_the_engine_answers(setup: Any, history: list[tuple[str, int, int]]) -> None:
    """Over random histories, asking the memo (twice, the clock moved between) gives the engine's plan."""
    world = World.start(setup.app, setup.zones, setup.capacities)
    memo = Memo()
    for kind, member, value in history:
        run(world, kind, member, value)
        views = world.views()
        for now in (world.now, world.now + value):
            assert memo.plan(world.app, views, world.assignment, now) == plan(
                world.app, views, world.assignment, now
            )


def test_member_targets_are_written_side_by_side_and_a_failure_holds_up_none() -> None:
    """A step that changes many members' targets sends the writes at once (here: no write returns
    before two are in flight), attempts every one even when one fails, then raises that failure."""
    both_in_flight = threading.Barrier(2, timeout=10)
    written: list[int] = []

    def write(member: int) -> None:
        both_in_flight.wait()
        written.append(member)
        if member == 3:
            raise ApiException(status=500, reason="busy")

    with pytest.raises(ApiException):
        side_by_side([partial(write, m) for m in range(6)], threads=2)
    assert sorted(written) == list(range(6))


def test_the_intent_this_loop_wrote_is_not_decoded_again_and_any_other_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kube, observed, memo, _ = settled_app()
    written = memo.planned.result.assignment if memo.planned else Assignment()
    app = kube.app
    assert memo.read_intent(app["status"]["intent"], 4) is written
    decoded: list[int] = []
    real = intentrebuild.read_intent
    monkeypatch.setattr(intentrebuild, "read_intent", lambda *a: decoded.append(1) or real(*a))
    reconcile(kube, replace(observed, app=app), 21.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    assert decoded == [], "the stored intent is what this loop encoded"

    edited = copy.deepcopy(app)
    edited["status"]["intent"]["generation"] += 1
    assert memo.read_intent(edited["status"]["intent"], 4) == replace(
        written, generation=written.generation + 1
    )
    assert decoded == [1], "an intent someone else wrote is decoded"
    with pytest.raises(ValueError, match="4 tasks for 6 partitions"):
        memo.read_intent(app["status"]["intent"], 6)


@dataclass
class RefusingMembers(RecordingKube):
    """Writes the app's status, but every member target write fails as it would on a 409 (a member's
    report written between the read and the write)."""

    def patch_member_spec(self, *args: Any, **kwargs: Any) -> None:
        raise ApiException(status=409, reason="Conflict")


def test_a_steps_events_are_posted_when_its_status_is_written_though_a_later_write_fails() -> None:
    """The status holds the step's decision: once it is written, the next step decides the same from
    it and announces nothing new, so the Events go out with the status, not after the member writes."""
    kube, observed, memo, _ = settled_app()
    refusing = RefusingMembers(kube.app)
    lost = replace(observed, pods=(ready_pod(0),))  # member 1's pod is gone: its standbys take over
    with pytest.raises(ApiException):
        reconcile(refusing, lost, 21.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    posted = [args[1] for name, args in refusing.writes if name == "event"]
    assert "patch_app_status" in [name for name, _ in refusing.writes]
    assert "FailedOverToStandby" in posted, posted

    reconcile(kube, replace(lost, app=refusing.app), 22.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    written = [name for name, _ in kube.writes]
    assert "patch_member_spec" in written, "the targets go out on the next step"
    assert "event" not in written, "and nothing is announced twice"
