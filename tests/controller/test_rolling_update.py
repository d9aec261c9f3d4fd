"""Rolling updates in the controller: the pod revision hash, reading it back, and acting on a step."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
from test_controller_core import APP, MODEL

from streamapp.api.names import HANDOFF_ANNOTATION, REVISION_LABEL
from streamapp.api.streamapp import StreamApp, StreamAppStatus
from streamapp.controller import children, costreports, enact, podrollout
from streamapp.controller.observe import PodState
from streamapp.controller.status import app_status, step_patch
from streamapp.rebalance import AppConfig, Assignment, MemberView, TaskAssignment, plan
from streamapp.rebalance.config import RebalanceConfig
from streamapp.rebalance.rollout import Costs, RolloutConfig, RolloutStep


def changed(path: tuple[str, ...], value: Any) -> StreamApp:
    body = copy.deepcopy(APP)
    node = body["spec"]
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return StreamApp.from_resource(body)


def test_every_member_pod_carries_the_one_revision_of_the_app() -> None:
    revision = children.pod_revision(MODEL)
    assert children.pod(MODEL, 0)["metadata"]["labels"][REVISION_LABEL] == revision
    assert children.pod(MODEL, 1)["metadata"]["labels"][REVISION_LABEL] == revision
    assert children.pod_revision(StreamApp.from_resource(copy.deepcopy(APP))) == revision


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("executor", "image"), "img:2"),
        (("executor", "resources"), {"requests": {"cpu": "2"}}),
        (("executor", "sparkConf"), {"spark.sql.shuffle.partitions": "4"}),
        (("executor", "podTemplate"), {"metadata": {"labels": {"team": "a"}}}),
        (("executor", "storage"), {}),
        (("pipeline", "transform"), "streamapp.executor.samples.counts:other"),
    ],
)
def test_whatever_a_pod_is_made_from_changes_the_revision(path: tuple[str, ...], value: Any) -> None:
    assert children.pod_revision(changed(path, value)) != children.pod_revision(MODEL)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("replicas",), 5),
        (("rebalance", "maxWarmupReplicas"), 4),
        (("rollingUpdate", "paused"), True),
    ],
)
def test_scaling_and_rebalance_settings_do_not_roll_the_pods(path: tuple[str, ...], value: Any) -> None:
    assert children.pod_revision(changed(path, value)) == children.pod_revision(MODEL)


def labelled(member: int, revision: str, since: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"counts-{member}",
        "uid": f"u{member}",
        "labels": {"streamapp.dev/member": str(member), REVISION_LABEL: revision},
    }
    if since is not None:
        meta["annotations"] = {HANDOFF_ANNOTATION: since}
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def test_a_pod_state_reads_its_revision_and_when_its_handoff_began() -> None:
    state = PodState.of(labelled(1, "abc", "12.5"))
    assert state is not None and (state.revision, state.handoff_since) == ("abc", 12.5)
    garbled = PodState.of(labelled(1, "abc", "soon"))
    assert garbled is not None and garbled.handoff_since is None


def states(*bodies: dict[str, Any]) -> dict[int, PodState]:
    found = [PodState.of(b) for b in bodies]
    return {s.member: s for s in found if s is not None}


def owning(*owners: int) -> Assignment:
    return Assignment(generation=1, tasks=tuple(TaskAssignment(active=m, epoch=1) for m in owners))


def test_the_step_retires_the_highest_outdated_member_and_marks_it_for_the_engine() -> None:
    pods = states(labelled(0, "old"), labelled(1, "old"))
    step = podrollout.step(pods, 2, "new", owning(0, 1, 0, 1), RolloutConfig(), 30.0, True, Costs())
    assert step.retiring == {1: 30.0}
    views = podrollout.mark_retiring([MemberView(0), MemberView(1)], step)
    assert [v.retiring for v in views] == [False, True]
    assert not any(v.upcoming for v in views), "no claim: a copy warmed ahead would not survive"


def test_the_member_handed_off_next_is_upcoming_for_the_engine_and_in_the_condition() -> None:
    pods = states(labelled(0, "old"), labelled(1, "old"), labelled(2, "old"))
    claims = Costs(claims=True)
    step = podrollout.step(pods, 3, "new", owning(0, 1, 2), RolloutConfig(), 30.0, True, claims)
    assert (step.retiring, step.upcoming) == ({2: 30.0}, (1,))
    views = podrollout.mark_retiring([MemberView(0), MemberView(1), MemberView(2)], step)
    assert [(v.retiring, v.upcoming) for v in views] == [(False, False), (False, True), (True, False)]
    message = podrollout.progressing(step, RolloutConfig(), {2: 1}).message
    assert message.endswith("; member 1 hands off next: copies of its tasks warm ahead")


@pytest.mark.parametrize("protocol", ["cooperative", "streamapp"])
def test_a_member_restarted_in_place_keeps_its_tasks_for_its_new_pod(protocol: str) -> None:
    """Under cooperative `auto` restarts in place (a handoff would be cold); the step that deletes the
    pod must not move its tasks: the engine holds them for the pod as for any lost member, which is
    returning (the operator re-creates its pod) — under streamapp, expected back in 10 s against
    restores of 100 s, so nothing warms elsewhere either. Planned as retiring instead, the real
    cluster bench saw them revoked and restored cold elsewhere."""
    pods = states(labelled(0, "old"), labelled(1, "old"))
    warm = protocol == "streamapp"
    config = RolloutConfig(strategy="inPlace")
    step = podrollout.step(pods, 2, "new", owning(0, 1, 0, 1), config, 30.0, warm, Costs())
    assert step.delete == (1,) and not step.retiring
    measured = [
        MemberView(0, restore_rate=1_000.0, restore_rows={0: 100_000, 2: 100_000}),
        MemberView(1, restore_rate=1_000.0, restore_rows={1: 100_000, 3: 100_000}),
    ]
    views = podrollout.mark_retiring(measured, step)
    assert [(v.alive, v.retiring, v.returning, v.replaced) for v in views] == [
        (True, False, False, False),
        (False, False, True, True),
    ]
    views = costreports.with_return_estimates(views, Costs(restart={1: 10.0}))
    app = AppConfig(4, 2, RebalanceConfig(protocol=protocol))  # type: ignore[arg-type]
    result = plan(app, views, owning(0, 1, 0, 1), 30.0)
    assert [t.active for t in result.assignment.tasks] == [0, 1, 0, 1]
    tasks = result.assignment.tasks
    assert all(t.revoking_since is None and not t.warmups for t in tasks)
    assert result.assignment.reserved_for(1) is not None


@dataclass
class RecordingKube:
    """Records the pod writes a rollout step makes (handler-level logic only)."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, grace_seconds: int | None = None, stuck: bool = False
    ) -> None:
        extra = () if grace_seconds is None and not stuck else (grace_seconds, stuck)
        self.calls.append(("delete_pod", name, *extra))

    def event(self, app: Any, reason: str, message: str, warning: bool = False) -> None:
        self.calls.append(("event", reason, message, warning))

    def annotate_pod(
        self, namespace: str, name: str, annotations: dict[str, str | None], *, uid: str
    ) -> None:
        self.calls.append(("annotate_pod", name, annotations))


def test_acting_persists_a_new_handoff_clears_an_abandoned_one_and_deletes_what_was_handed_off() -> None:
    pods = states(labelled(0, "old", "5.000"), labelled(1, "old"), labelled(2, "old", "1.000"))
    step = RolloutStep(retiring={1: 9.0}, delete=(2,), updated=0, outdated=(0, 1, 2))
    kube = RecordingKube()
    enact.rollout(kube, "counts", "ns", step, pods)  # type: ignore[arg-type]
    assert kube.calls == [
        ("annotate_pod", "counts-0", {HANDOFF_ANNOTATION: None}),
        ("annotate_pod", "counts-1", {HANDOFF_ANNOTATION: "9.000"}),
        ("delete_pod", "counts-2"),
    ]
    kube.calls.clear()
    again = states(labelled(1, "old", "9.000"))
    enact.rollout(kube, "counts", "ns", RolloutStep({1: 9.0}, (), 0, (1,)), again)  # type: ignore[arg-type]
    assert kube.calls == [], "a handoff already recorded is not written again"


def test_status_shows_revisions_and_a_progressing_condition_while_rolling() -> None:
    pods = states(labelled(0, "old"), labelled(1, "new"), labelled(2, "older"), labelled(3, "old"))
    step = RolloutStep({3: 1.0}, (), 1, (0, 2, 3), reasons={3: "its restart time is not measured yet"})
    shown = podrollout.with_revisions(StreamAppStatus(), step, "new", pods)
    assert (shown.updated_replicas, shown.update_revision, shown.current_revision) == (1, "new", "old")
    rolling = podrollout.progressing(step, RolloutConfig(), {3: 2})
    assert (rolling.status, rolling.reason) == (True, "RollingUpdate")
    assert rolling.message == (
        "3 member(s) still run an older spec; member 3 (2 tasks) hands off: its restart time is not measured yet"
    )
    paused = podrollout.progressing(step, RolloutConfig(paused=True), {})
    assert (paused.status, paused.reason) == (False, "RolloutPaused")
    done = RolloutStep({}, (), 4, ())
    assert podrollout.with_revisions(StreamAppStatus(), done, "new", pods).current_revision == "new"
    assert podrollout.progressing(done, RolloutConfig(), {}).reason == "RolloutComplete"


def test_a_member_handing_off_for_a_rollout_shows_as_draining() -> None:
    views = [MemberView(0), MemberView(1, retiring=True)]
    pods = states(labelled(0, "new"), labelled(1, "old"))
    plan_result = plan(AppConfig(4, 2), views, Assignment.empty(4), 0.0)
    status = step_patch(
        app_status(MODEL, plan_result, Assignment.empty(4), views, pods, "2026-01-01T00:00:00Z")
    )
    assert [m["phase"] for m in status["members"]] == ["Ready", "Draining"]
    assert all(t.active == 0 for t in plan_result.assignment.tasks)


def test_the_wire_block_becomes_the_engine_side_config() -> None:
    assert MODEL.spec.rolling_update.config() == RolloutConfig()
    custom = changed(
        ("rollingUpdate",), {"strategy": "inPlace", "maxUnavailable": 3, "handoffTimeout": "1m30s"}
    )
    assert custom.spec.rolling_update.config() == RolloutConfig("inPlace", 3, False, 90.0)
