"""What a restart and a handoff cost, from the members' reports, kept in the app's status; and the
rollout saying which way each member went, with the figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from api_samples import app_model
from test_controller_core import APP

from streamapp.api.streamapp import MemberSummary, StreamApp, StreamAppStatus
from streamapp.controller import costreports, enact
from streamapp.controller.observe import PodState
from streamapp.controller.status import patch, status_changes
from streamapp.rebalance.rollout import Costs, RolloutStep

PODS = {m: PodState(m, f"counts-{m}", f"uid-{m}", True, False, None) for m in (0, 1, 2)}


def member(member_id: int, pod_uid: str, *resumed: tuple[str, float]) -> dict[str, Any]:
    """A member's report: one active task per resumption (how, seconds), and one never measured."""
    tasks: list[dict[str, Any]] = [
        {"task": 10 * member_id + i, "role": "active", "resumedBy": by, "resumedAfter": seconds}
        for i, (by, seconds) in enumerate(resumed)
    ]
    tasks.append({"task": 10 * member_id + 9, "role": "active"})
    return {"spec": {"memberId": member_id}, "status": {"podUID": pod_uid, "tasks": tasks}}


def test_a_members_restart_cost_is_its_slowest_restarted_task_from_its_current_pod() -> None:
    members = [
        member(0, "uid-0", ("restart", 3.1), ("restart", 2.4), ("handoff", 9.0)),
        member(1, "old-uid", ("restart", 1.0)),  # an earlier pod's report: that pod is gone
        member(2, "uid-2", ("cold", 30.0)),
    ]
    assert costreports.measured(members, PODS, claims=True) == Costs({0: 3.1}, 9.0, True)


def test_the_handoff_cost_is_the_median_over_every_members_handed_off_tasks() -> None:
    members = [
        member(0, "uid-0", ("handoff", 4.0), ("handoff", 30.0)),
        member(1, "uid-1", ("handoff", 5.5), ("restart", 1.0)),
        member(2, "uid-2", ("handoff", 4.9)),
        member(2, "stale", ("handoff", 100.0)),
    ]
    assert (
        costreports.measured(members, PODS, claims=False).handoff == 5.2
    )  # (4.9 + 5.5) / 2, one slow move aside


def test_kept_costs_stay_until_a_new_measurement_replaces_them() -> None:
    app = StreamAppStatus(
        members=(MemberSummary(id=0, phase="Ready", restart_seconds=3.1), MemberSummary(id=1, phase="Ready")),
        handoff_seconds=4.8,
    )
    assert costreports.known(app, [], PODS, claims=True) == Costs({0: 3.1}, 4.8, True)
    members = [member(1, "uid-1", ("restart", 2.0)), member(2, "uid-2", ("handoff", 6.0))]
    assert costreports.known(app, members, PODS, claims=True) == Costs({0: 3.1, 1: 2.0}, 6.0, True)
    moved_on = [member(0, "uid-0"), member(1, "uid-1")]  # the measured tasks moved on with their samples
    assert costreports.known(app, moved_on, PODS, claims=True) == Costs({0: 3.1}, 4.8, True)


def test_costs_are_written_into_the_member_rows_and_a_report_that_changes_none_writes_nothing() -> None:
    rows = StreamAppStatus(members=(MemberSummary(id=0, phase="Ready"), MemberSummary(id=1, phase="Ready")))
    known = Costs({0: 3.1}, 4.8, True)
    fields = patch(costreports.with_costs(rows, known), ("members", "handoffSeconds"))
    assert fields == {
        "members": [
            {"id": 0, "phase": "Ready", "active": 0, "standby": 0, "warmup": 0, "restartSeconds": 3.1},
            {"id": 1, "phase": "Ready", "active": 0, "standby": 0, "warmup": 0},
        ],
        "handoffSeconds": 4.8,
    }
    stored = StreamAppStatus.from_dict(fields)
    again = [member(0, "uid-0", ("restart", 3.1)), member(1, "uid-1", ("handoff", 4.8))]
    unchanged = costreports.with_costs(rows, costreports.known(stored, again, PODS, True))
    assert status_changes(fields, patch(unchanged, ("members", "handoffSeconds"))) == {}
    unknown = patch(costreports.with_costs(rows, Costs()), ("handoffSeconds",))
    assert unknown == {"handoffSeconds": None}, "unknown: removed from the status"


def test_the_status_model_declares_what_the_operator_keeps() -> None:
    kept = {"members": [{"id": 0, "phase": "Ready", "restartSeconds": 3}], "handoffSeconds": 4.8}
    status = StreamApp.from_resource({**APP, "status": kept}).status
    assert (status.members[0].restart_seconds, status.handoff_seconds) == (3.0, 4.8)


@dataclass
class RecordingKube:
    """Records the Events a rollout step posts (handler-level logic only)."""

    events: list[tuple[str, str]] = field(default_factory=list)

    def event(self, app: Any, reason: str, message: str, warning: bool = False) -> None:
        self.events.append((reason, message))


def pod(member_id: int, handoff_since: float | None) -> PodState:
    return PodState(
        member_id, f"counts-{member_id}", f"uid-{member_id}", True, False, None, handoff_since=handoff_since
    )


def test_an_event_names_each_member_when_its_way_is_chosen_and_not_while_it_hands_off() -> None:
    step = RolloutStep(
        {2: 5.0},
        (1,),
        0,
        (0, 1, 2),
        reasons={2: "its restart time is not measured yet", 1: "measured restart 3.1 s < handoff 4.8 s"},
    )
    kube = RecordingKube()
    pods = {0: pod(0, None), 1: pod(1, None), 2: pod(2, None)}
    enact.announce(kube, app_model().metadata, step, pods, {2: 4})  # type: ignore[arg-type]
    assert kube.events == [
        (
            "RolloutStrategyChosen",
            "member 1 restarts in place: measured restart 3.1 s < handoff 4.8 s; "
            "member 2 (4 tasks) hands off: its restart time is not measured yet",
        )
    ]
    kube.events.clear()
    going_on = RolloutStep({2: 5.0}, (), 0, (0, 2), reasons={2: "its restart time is not measured yet"})
    enact.announce(kube, app_model().metadata, going_on, {**pods, 2: pod(2, 5.0)}, {2: 3})  # type: ignore[arg-type]
    assert kube.events == []
