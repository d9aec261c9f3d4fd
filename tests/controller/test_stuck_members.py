"""Stuck members in the controller: the reports that say a batch round hangs, and the step that
replaces such a member's pod quickly, with a Warning Event."""

from __future__ import annotations

from typing import Any

from api_samples import app_model
from test_controller_core import pod
from test_rolling_update import RecordingKube, labelled, owning, states

from streamapp.api.names import RESTART_ANNOTATION, STUCK_RESTART
from streamapp.controller import enact, podrollout
from streamapp.controller.observe import batch_running_since, member_views
from streamapp.rebalance import MemberView
from streamapp.rebalance.rollout import Costs, RolloutConfig


def reporting(member_id: int, pod_uid: str, since: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"podUID": pod_uid}
    if since is not None:
        status["batchRunningSince"] = since
    return {"spec": {"memberId": member_id, "generation": 1}, "status": status}


def test_only_the_current_pods_report_of_a_running_round_counts() -> None:
    running = batch_running_since(
        pods=[pod(0, "p0"), pod(1, "p1-new"), pod(2, "p2")],
        members=[
            reporting(0, "p0", "2026-01-01T00:01:40Z"),
            reporting(1, "p1-old", "2026-01-01T00:00:00Z"),
            reporting(2, "p2", None),
        ],
    )
    assert running == {0: 1767225700.0}


def test_a_stuck_member_is_replaced_within_a_short_grace_with_a_warning() -> None:
    """Member 1's round has run 400 s against a 300-s batchTimeout: its pod is deleted with a 5-s
    grace (its executor cannot finish the round), a Warning Event says why, and the engine sees it
    gone and coming back; nothing else moves."""
    pods = states(labelled(0, "rev"), labelled(1, "rev"), labelled(2, "rev"))
    step = podrollout.step(
        pods, 3, "rev", owning(0, 1, 2), RolloutConfig(), 1_000.0, True, Costs(), (), {1: 600.0}, 300.0
    )
    assert (step.delete, step.stuck, step.retiring) == ((1,), (1,), {})
    kube = RecordingKube()
    enact.rollout(kube, "counts", "ns", step, pods)  # type: ignore[arg-type]
    enact.announce(kube, app_model().metadata, step, pods, {1: 1})  # type: ignore[arg-type]
    assert kube.calls == [
        ("delete_pod", "counts-1", podrollout.STUCK_GRACE_SECONDS, True),
        (
            "event",
            "MemberStuck",
            "member 1 (1 tasks) is replaced: its batch round has run 400 s, over batchTimeout (300 s): "
            "its executor is stuck",
            True,
        ),
    ]
    views = podrollout.mark_retiring([MemberView(0), MemberView(1), MemberView(2)], step)
    assert [(v.alive, v.returning) for v in views] == [(True, False), (False, True), (True, False)]
    assert not views[1].replaced, "a hang is a failure (it counts toward flapping), not a planned restart"
    early = podrollout.step(
        pods, 3, "rev", owning(0, 1, 2), RolloutConfig(), 800.0, True, Costs(), (), {1: 600.0}, 300.0
    )
    assert (early.delete, early.wake_at) == ((), 900.0)


def test_a_pod_restarted_for_a_hang_is_not_a_planned_restart() -> None:
    """The operator's restart mark says why: a rollout's restart is planned (no flap, no insurance), a
    stuck executor's is a failure, like a crash."""
    stuck, planned = pod(1, "p1"), pod(2, "p2")
    stuck["metadata"]["annotations"] = {RESTART_ANNOTATION: STUCK_RESTART}
    planned["metadata"]["annotations"] = {RESTART_ANNOTATION: "true"}
    for body in (stuck, planned):
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        body["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    views = member_views([pod(0, "p0"), stuck, planned], [], {}, wanted=3)
    assert [(v.id, v.replaced) for v in views] == [(0, False), (1, False), (2, True)]
