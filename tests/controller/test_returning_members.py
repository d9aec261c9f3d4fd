"""A lost member whose pod is visibly starting again is returning; one that is stuck is not.

What the kubelet reports decides (`controller.observe._starting`): a container being created, starting
without being ready yet, or waiting out the back-off after a first crash is on its way back; a second
crash soon after the first, an image that does not pull, a pod with no node, one being deleted, or a Ready executor in a pod
that is not (its node stopped reporting) are not. The app's status shows such a member holding tasks
as Restarting rather than Lost.
"""

from __future__ import annotations

from typing import Any

from test_controller_core import pod

from streamapp.controller.observe import PodState, member_views
from streamapp.controller.status import members_summary
from streamapp.rebalance import Assignment, TaskAssignment


def starting(
    *containers: dict[str, Any], node: str = "n-a", init: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    body = pod(1, "b", ready=False, node=node)
    body["status"]["containerStatuses"] = list(containers)
    if init:
        body["status"]["initContainerStatuses"] = list(init)
    return body


def executor(state: dict[str, Any], restarts: int = 0, ready: bool = False) -> dict[str, Any]:
    return {"name": "executor", "state": state, "restartCount": restarts, "ready": ready}


def returning(body: dict[str, Any]) -> bool:
    state = PodState.of(body)
    assert state is not None
    [view] = [v for v in member_views([body], [], {}, wanted=2) if v.id == 1]
    assert view.returning == state.returning and not view.alive
    return state.returning


CREATING = {"waiting": {"reason": "ContainerCreating"}}
RUNNING = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
BACKOFF = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}}


def test_a_pod_starting_or_restarting_after_a_first_crash_is_returning() -> None:
    assert returning(starting())  # scheduled, the kubelet has not reported yet
    assert returning(starting(executor(CREATING)))
    assert returning(starting(executor(BACKOFF)))  # the first crash, waiting out the back-off
    assert returning(starting(executor(RUNNING, restarts=1)))  # restarted once, Spark starting
    assert returning(
        starting(executor({"waiting": {"reason": "PodInitializing"}}), init=(executor(RUNNING),))
    )
    done = {"name": "setup", "state": {"terminated": {"exitCode": 0}}, "restartCount": 1}
    assert returning(starting(executor(CREATING), init=(done,)))  # an init container that retried once, done


def test_a_crash_loop_or_a_start_that_needs_a_person_is_not_returning() -> None:
    assert not returning(starting(executor(BACKOFF, restarts=1)))  # a second crash
    assert not returning(starting(executor(RUNNING, restarts=2)))
    for reason in ("ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError"):
        assert not returning(starting(executor({"waiting": {"reason": reason}})))
    failed_twice = {"name": "setup", "state": {"terminated": {"exitCode": 1}}, "restartCount": 1}
    assert not returning(starting(executor({"waiting": {"reason": "PodInitializing"}}), init=(failed_twice,)))
    init_looping = {"name": "setup", "state": BACKOFF, "restartCount": 3}
    assert not returning(starting(executor({"waiting": {"reason": "PodInitializing"}}), init=(init_looping,)))


def test_crashes_count_toward_a_loop_only_when_close_together() -> None:
    """`restartCount` counts over the pod's life: a crash after a day of running is a new bounce, a
    crash after a minute's run the second of a loop (the run is the one the latest crash ended)."""

    def crashed(began: str, ended: str) -> dict[str, Any]:
        return {"terminated": {"exitCode": 137, "startedAt": began, "finishedAt": ended}}

    day_run = crashed("2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z")
    minute_run = crashed("2026-01-02T00:00:00Z", "2026-01-02T00:01:00Z")
    for run, loop in ((day_run, False), (minute_run, True)):
        backoff = executor(BACKOFF, restarts=1) | {"lastState": run}
        assert returning(starting(backoff)) is not loop
        restarted = executor(RUNNING, restarts=2) | {"lastState": run}
        assert returning(starting(restarted)) is not loop
        assert returning(starting(executor(run, restarts=1))) is not loop  # terminated, not yet restarted


def test_a_pod_with_no_node_being_deleted_or_on_a_silent_node_is_not_returning() -> None:
    assert not returning(starting(executor(CREATING), node=""))
    deleting = starting(executor(RUNNING, restarts=1))
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not returning(deleting)
    # The node stopped reporting: the pod was marked not Ready, its executor's last word is "ready".
    assert not returning(starting(executor(RUNNING, ready=True)))


def test_a_ready_pod_is_alive_not_returning() -> None:
    state = PodState.of(pod(1, "b"))
    assert state is not None and state.alive and not state.returning


def test_the_app_status_shows_a_returning_member_holding_tasks_as_restarting() -> None:
    assignment = Assignment(
        generation=2, tasks=tuple(TaskAssignment(active=m, epoch=1) for m in (0, 1, 0, 1))
    )
    for body, phase in ((starting(executor(RUNNING, restarts=1)), "Restarting"), (starting(node=""), "Lost")):
        pods = {s.member: s for s in map(PodState.of, (pod(0, "a"), body)) if s is not None}
        views = member_views([pod(0, "a"), body], [], {}, wanted=2)
        rows = [row.to_dict() for row in members_summary("counts", assignment, views, pods, replicas=2)]
        assert [r["phase"] for r in rows] == ["Ready", phase]
