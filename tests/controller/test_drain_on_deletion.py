"""Pods deleted by someone else (evictions, node drains) are drained; the operator's own deletions are not.

The decisions are pure: which members are retiring (observe + rollout), what their StreamAppMember says
(`retiring`), what the pods are given (grace period, drain budget) and what the PDB allows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from test_controller_core import APP, MODEL, member, pod

from streamapp.api.member import StreamAppMemberSpec
from streamapp.api.names import RESTART_ANNOTATION
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children, podrollout, reconcile, supporting
from streamapp.controller.observe import PodState, member_views
from streamapp.rebalance import AppConfig, Assignment, RebalanceConfig, TaskAssignment, member_targets, plan
from streamapp.rebalance.rollout import RolloutStep

NO_ROLLOUT = RolloutStep(retiring={}, delete=(), updated=2, outdated=())


def restarted(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["annotations"] = {RESTART_ANNOTATION: "true"}
    return body


def app_with(**executor: Any) -> StreamApp:
    body = copy.deepcopy(APP)
    body["spec"]["executor"].update(executor)
    return StreamApp.from_resource(body)


def test_a_pod_deleted_by_someone_else_while_ready_is_alive_and_retiring() -> None:
    views = member_views([pod(0, "a"), pod(1, "b", deleting=True)], [], {}, wanted=2)
    assert [(v.id, v.alive, v.retiring) for v in views] == [(0, True, False), (1, True, True)]


def test_a_pod_the_operator_restarts_or_one_no_longer_ready_is_not_drained() -> None:
    for body in (restarted(pod(1, "b", deleting=True)), pod(1, "b", ready=False, deleting=True)):
        [_, view] = member_views([pod(0, "a"), body], [], {}, wanted=2)
        assert (view.alive, view.retiring) == (False, False)
        state = PodState.of(body)
        assert state is not None and not state.draining


def test_a_pod_deleted_with_no_grace_period_is_lost_not_drained() -> None:
    """A force delete (a node gone) leaves no time to hand over: the member is lost and its tasks are
    held for it (not revoked, which would move them cold at once), even when a watch event shows the
    pod still Ready."""
    forced = pod(1, "b", deleting=True)
    forced["metadata"]["deletionGracePeriodSeconds"] = 0
    [_, view] = member_views([pod(0, "a"), forced], [], {}, wanted=2)
    assert (view.alive, view.retiring) == (False, False)
    previous = Assignment(generation=3, tasks=tuple(TaskAssignment(active=m, epoch=1) for m in (0, 1, 0, 1)))
    for protocol in ("cooperative", "streamapp"):
        config = AppConfig(4, 2, RebalanceConfig(protocol=protocol))
        views = member_views([pod(0, "a"), forced], [], {}, wanted=2)
        planned = plan(config, views, previous, now=100.0).assignment
        assert [(t.active, t.revoking_since) for t in planned.tasks][1::2] == [(1, None), (1, None)], protocol
        assert [r.member for r in planned.reservations] == [1], protocol
    graceful = pod(1, "b", deleting=True)
    graceful["metadata"]["deletionGracePeriodSeconds"] = 30
    [_, drained] = member_views([pod(0, "a"), graceful], [], {}, wanted=2)
    assert (drained.alive, drained.retiring) == (True, True)


def test_executors_are_told_to_retire_for_handoffs_and_drains_never_for_restarts_in_place() -> None:
    views = member_views([pod(0, "a"), pod(1, "b", deleting=True), pod(2, "c")], [], {}, wanted=4)
    step = RolloutStep(retiring={2: 5.0}, delete=(3,), updated=0, outdated=(2, 3))
    assert podrollout.handing_off(views, step) == {1, 2}
    assert podrollout.handing_off(views, NO_ROLLOUT) == {1}


def test_the_engine_moves_a_draining_members_tasks_and_gives_it_nothing_new() -> None:
    previous = Assignment(generation=3, tasks=tuple(TaskAssignment(active=m, epoch=1) for m in (0, 1, 0, 1)))
    reported = [member(0, "a", 3, {}), member(1, "b", 3, {})]
    views = member_views([pod(0, "a"), pod(1, "b", deleting=True)], reported, {}, wanted=2)
    result = plan(AppConfig(4, 2), views, previous, now=100.0)
    targets = member_targets(result.assignment)
    assert set(targets[0].warmup) == {1, 3}, "the leaving member's tasks warm up on the one that stays"
    assert set(targets[1].active) == {1, 3} and not targets[1].warmup and not targets[1].standby


@dataclass
class SpecKube:
    """Records the StreamAppMember specs a reconcile writes (handler-level logic only)."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def patch_member_spec(
        self, namespace: str, name: str, spec: dict[str, Any], *, uid: str, version: str | None = None
    ) -> None:
        self.specs[name] = spec

    def create_member(self, namespace: str, body: dict[str, Any]) -> None:
        self.specs[body["metadata"]["name"]] = body["spec"]


def test_the_retiring_flag_is_written_even_when_the_assignment_did_not_change() -> None:
    previous = Assignment(generation=3, tasks=(TaskAssignment(active=0, epoch=1), TaskAssignment(1, 1)))
    result = plan(AppConfig(2, 2), member_views([pod(0, "a"), pod(1, "b")], [], {}, 2), previous, 1.0)
    members = [
        {"spec": children.member_spec("counts", m, t, 3, False, ())}
        for m, t in member_targets(previous).items()
    ]
    kube = SpecKube()
    reconcile._write_member_specs(kube, MODEL, result, members, frozenset({1}))  # type: ignore[arg-type]
    assert list(kube.specs) == ["counts-1"]
    written = StreamAppMemberSpec.from_dict(kube.specs["counts-1"])
    assert written.retiring and written.generation == 3


def test_member_pods_get_a_grace_period_and_a_drain_budget_within_it() -> None:
    def settings(app: StreamApp) -> tuple[int, str]:
        rendered = children.pod(app, 0)["spec"]
        env = {e["name"]: e.get("value") for e in rendered["containers"][0]["env"]}
        return rendered["terminationGracePeriodSeconds"], env["STREAMAPP_DRAIN_SECONDS"]

    assert settings(MODEL) == (60, "50")
    assert settings(app_with(terminationGracePeriodSeconds=8)) == (8, "4")
    template = {"spec": {"terminationGracePeriodSeconds": 300}}
    assert settings(app_with(podTemplate=template)) == (300, "290"), "the pod template's value wins"
    assert children.drain_seconds(1) == 1 and children.drain_seconds(0) == 0


def test_the_disruption_budget_follows_rolling_update_max_unavailable() -> None:
    body = copy.deepcopy(APP)
    body["spec"]["rollingUpdate"] = {"maxUnavailable": 2}
    app = StreamApp.from_resource(body)
    assert children.disruption_budget(MODEL)["spec"]["maxUnavailable"] == 1
    budget = children.disruption_budget(app)
    assert budget["spec"]["maxUnavailable"] == 2
    observed = [children.disruption_budget(MODEL)]
    [fix] = supporting.repairs([budget], observed)
    assert (fix.action, fix.kind) == ("patch", "PodDisruptionBudget")
    defaulted = copy.deepcopy(budget)
    defaulted["spec"]["unhealthyPodEvictionPolicy"] = "IfHealthyBudget"
    assert supporting.repairs([budget], [defaulted]) == [], "fields the server or user adds are left alone"
