"""The operator's side of revocation deadlines and the epoch floor: what it reads, writes and deletes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry
from test_controller_core import APP, MODEL, pod

from streamapp.controller import reconcile
from streamapp.controller.metrics import FENCED_TASKS_METRIC, Metrics
from streamapp.controller.observe import PodState, member_views
from streamapp.controller.status import FENCED_ACTIVE, app_status, step_patch
from streamapp.rebalance import AppConfig, Assignment, Event, EventKind, MemberView, Plan, TaskAssignment


def report(member_id: int, pod_uid: str, *tasks: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"memberId": member_id}, "status": {"podUID": pod_uid, "tasks": list(tasks)}}


def test_store_epochs_count_from_any_report_and_fencing_only_from_the_current_pod() -> None:
    views = member_views(
        pods=[pod(0, "p0"), pod(1, "p1-new")],
        members=[
            report(0, "p0", {"task": 0, "role": "active", "epoch": 1, "storeEpoch": 7, "fencedBy": 7}),
            report(1, "p1-old", {"task": 1, "role": "active", "epoch": 1, "fencedBy": 4, "storeEpoch": 3}),
        ],
        zones={},
        wanted=2,
    )
    assert views[0].store_epochs == {0: 7} and views[0].fenced == {0}
    assert views[1].store_epochs == {1: 4}, "the store remembers epochs whoever saw them"
    assert views[1].fenced == frozenset(), "a new pod takes over afresh"


def plan_with(
    fenced: tuple[int, ...] = (), timed_out: tuple[int, ...] = (), events: tuple[Event, ...] = ()
) -> Plan:
    tasks = (TaskAssignment(0, 8), TaskAssignment(1, 1), TaskAssignment(0, 1), TaskAssignment(1, 1))
    assignment = Assignment(generation=2, tasks=tasks)
    return Plan(assignment, False, None, events, (), "", timed_out, fenced)


def test_a_fenced_active_is_degraded_and_not_ready_with_the_tasks_named() -> None:
    views = [MemberView(0), MemberView(1)]
    pods = {
        0: PodState(0, "counts-0", "u0", True, False, None),
        1: PodState(1, "counts-1", "u1", True, False, None),
    }
    status = step_patch(
        app_status(MODEL, plan_with(fenced=(0, 2)), Assignment(), views, pods, "2026-01-01T00:00:00Z")
    )
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Degraded"]["status"] == "True" and conditions["Degraded"]["reason"] == FENCED_ACTIVE
    assert "tasks 0,2 are fenced" in conditions["Degraded"]["message"]
    assert conditions["Ready"]["status"] == "False"
    resolved = step_patch(app_status(MODEL, plan_with(), Assignment(), views, pods, "2026-01-01T00:00:00Z"))
    assert {c["type"]: c["status"] for c in resolved["conditions"]}["Degraded"] == "False"


@dataclass
class RecordingKube:
    """Records the calls the pod-management and report steps make (handler-level logic only)."""

    calls: list[tuple[str, ...]] = field(default_factory=list)

    def delete_pod(self, namespace: str, name: str, *, uid: str) -> None:
        self.calls.append(("delete_pod", name))

    refusing: str = ""

    def create(self, namespace: str, body: dict[str, Any]) -> None:
        if body["metadata"]["name"] == self.refusing:
            raise ApiException(status=403, reason="Forbidden")
        self.calls.append(("create", body["kind"], body["metadata"]["name"]))

    def delete_member(self, namespace: str, name: str, *, uid: str) -> None:
        self.calls.append(("delete_member", name))

    def delete_claim(self, namespace: str, name: str, owner_uid: str = "") -> None:
        self.calls.append(("delete_claim", name))

    def event(self, app: Any, reason: str, message: str, warning: bool = False) -> None:
        self.calls.append(("event", reason, "Warning" if warning else "Normal"))


def test_the_pod_of_a_member_that_timed_out_is_deleted_once() -> None:
    kube = RecordingKube()
    config = AppConfig(4, 2)
    alive = {
        0: PodState(0, "counts-0", "u0", True, False, None),
        1: PodState(1, "counts-1", "u1", True, False, None),
    }
    reconcile._manage_pods(kube, MODEL, config, plan_with(timed_out=(1,)), alive, [])  # type: ignore[arg-type]
    assert kube.calls == [("delete_pod", "counts-1")]
    leaving = {**alive, 1: PodState(1, "counts-1", "u1", True, True, None)}
    kube.calls.clear()
    reconcile._manage_pods(kube, MODEL, config, plan_with(timed_out=(1,)), leaving, [])  # type: ignore[arg-type]
    assert kube.calls == [], "a terminating pod is not deleted again, nor replaced before it is gone"


def test_a_refused_pod_holds_up_no_other_member_and_the_refusal_is_raised_after_as_a_block() -> None:
    kube = RecordingKube(refusing="counts-0")
    draining = Plan(Assignment(generation=2), False, None, (), (5,), "")
    members = [{"spec": {"memberId": 5}}]
    with pytest.raises(reconcile.PodCreateRefused) as refused:
        reconcile._manage_pods(kube, MODEL, AppConfig(4, 2), draining, {}, members)  # type: ignore[arg-type]
    assert str(refused.value) == "the API server refuses member 0's Pod: 403 Forbidden"
    assert ("create", "Pod", "counts-1") in kube.calls, "the next member's pod is still created"
    assert ("delete_member", "counts-5") in kube.calls, "a drained member is still removed"
    kube = RecordingKube(refusing="counts-0")
    kube.create = lambda namespace, body: (_ for _ in ()).throw(ApiException(status=503))  # type: ignore[method-assign]
    with pytest.raises(ApiException):
        reconcile._manage_pods(kube, MODEL, AppConfig(4, 2), draining, {}, members)  # type: ignore[arg-type]
    assert kube.calls == [], "a server error stops the step at once, as before"


def test_timeouts_and_fencing_are_warnings_and_fenced_tasks_a_metric() -> None:
    kube = RecordingKube()
    metrics = Metrics(CollectorRegistry())
    events = (
        Event(EventKind.REVOCATION_TIMED_OUT, 1, (3,), "not acknowledged within 300s"),
        Event(EventKind.TASK_FENCED, 0, (0, 2), "the store holds a higher epoch"),
        Event(EventKind.TASKS_REVOKED, 0, (1,)),
    )
    reconcile._report(kube, MODEL, plan_with(fenced=(0, 2), events=events), Assignment(), [], metrics)  # type: ignore[arg-type]
    assert ("event", "RevocationTimedOut", "Warning") in kube.calls
    assert ("event", "TaskFenced", "Warning") in kube.calls
    assert ("event", "TasksRevoked", "Normal") in kube.calls
    labels = {"namespace": APP["metadata"]["namespace"], "app": APP["metadata"]["name"]}
    assert metrics.registry.get_sample_value(FENCED_TASKS_METRIC, labels) == 2


def test_a_step_posts_one_event_per_kind_however_many_members_it_touched() -> None:
    kube = RecordingMessages()
    metrics = Metrics(CollectorRegistry())
    events = tuple(Event(EventKind.WARMUP_STARTED, m, (m, m + 100)) for m in range(300))
    events += (Event(EventKind.TASKS_REVOKED, 0, (1,)),)
    reconcile._report(kube, MODEL, plan_with(events=events), Assignment(), [], metrics)  # type: ignore[arg-type]
    assert [reason for reason, _ in kube.posted] == ["WarmupStarted", "TasksRevoked"]
    started = kube.posted[0][1]
    assert started.startswith("WarmupStarted member 0: tasks 0,100; WarmupStarted member 1: tasks 1,101")
    assert len(started) <= 1024
    shown = started.count("WarmupStarted member")
    assert started.endswith(f"; and {300 - shown} more")
    assert kube.posted[1][1] == "TasksRevoked member 0: tasks 1"


@dataclass
class RecordingMessages(RecordingKube):
    """Keeps each Event's reason and message."""

    posted: list[tuple[str, str]] = field(default_factory=list)

    def event(self, app: Any, reason: str, message: str, warning: bool = False) -> None:
        self.posted.append((reason, message))
