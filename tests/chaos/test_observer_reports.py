"""The chaos observer's notion of a *current* report (e2e/chaos/observer.py), on hand-made snapshots.

The observer counted the last report of a SIGKILLed process as its successor's when the report was
written in the same whole second as the container restarted (both times are whole seconds): tasks
restored elsewhere meanwhile then looked active on two members. A report counts only when the
process that made it started no earlier than the running container.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubernetes import client

from chaos.observer import Observer, current_reports, double_actives, evidence, member_line


def _pod(name: str, uid: str, container_started: str | None) -> client.V1Pod:
    running = (
        client.V1ContainerStateRunning(started_at=datetime.fromisoformat(container_started))
        if container_started
        else None
    )
    state = client.V1ContainerState(running=running)
    status = client.V1ContainerStatus(
        name="executor", image="x", image_id="", ready=False, restart_count=1, state=state
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, uid=uid, resource_version="7"),
        status=client.V1PodStatus(container_statuses=[status], conditions=[]),
    )


def _member(name: str, uid: str, started: str, reported: str, active: list[int]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "9"},
        "spec": {"generation": 3, "active": [{"task": t, "epoch": 2} for t in active]},
        "status": {
            "podUID": uid,
            "startedAt": started,
            "reportedAt": reported,
            "observedGeneration": 3,
            "tasks": [{"task": t, "role": "active", "epoch": 2} for t in active],
        },
    }


def test_the_last_report_of_a_killed_process_is_not_its_successors_within_the_same_second() -> None:
    # chaos-1's process started at 10:00:00, reported at 10:05:07 (.3, written as whole seconds) and
    # was killed; its container restarted at 10:05:07 (.8); its tasks went to chaos-0
    members = [
        _member("chaos-1", "u1", "2026-11-28T10:00:00Z", "2026-11-28T10:05:07Z", [0, 1]),
        _member("chaos-0", "u0", "2026-11-28T09:59:58Z", "2026-11-28T10:05:09Z", [0, 1, 2]),
    ]
    pods = [
        _pod("chaos-1", "u1", "2026-11-28T10:05:07+00:00"),
        _pod("chaos-0", "u0", "2026-11-28T09:59:50+00:00"),
    ]
    reports = current_reports(members, pods)
    assert sorted(reports) == ["chaos-0"]
    assert double_actives(reports) == {}


def test_the_new_process_report_counts_from_its_first_write() -> None:
    members = [_member("chaos-1", "u1", "2026-11-28T10:05:09Z", "2026-11-28T10:05:15Z", [3])]
    pods = [_pod("chaos-1", "u1", "2026-11-28T10:05:07+00:00")]
    assert current_reports(members, pods) == {"chaos-1": members[0]["status"]["tasks"]}


def test_reports_of_another_pod_or_of_a_container_not_running_never_count() -> None:
    member = _member("chaos-1", "u1", "2026-11-28T10:05:09Z", "2026-11-28T10:05:15Z", [3])
    assert current_reports([member], [_pod("chaos-1", "u2", "2026-11-28T10:05:07+00:00")]) == {}
    assert current_reports([member], [_pod("chaos-1", "u1", None)]) == {}
    assert current_reports([member], []) == {}


def test_two_current_actives_are_reported_with_their_evidence() -> None:
    members = [
        _member("chaos-1", "u1", "2026-11-28T10:05:09Z", "2026-11-28T10:05:15Z", [4]),
        _member("chaos-0", "u0", "2026-11-28T09:59:58Z", "2026-11-28T10:05:09Z", [4]),
    ]
    pods = [
        _pod("chaos-1", "u1", "2026-11-28T10:05:07+00:00"),
        _pod("chaos-0", "u0", "2026-11-28T09:59:50+00:00"),
    ]
    doubles = double_actives(current_reports(members, pods))
    assert {t: sorted(n) for t, n in doubles.items()} == {4: ["chaos-0", "chaos-1"]}
    said = evidence(members, pods, doubles[4], 4)
    assert "chaos-1: rv=9 generation=3 target epoch=2 acked=3 podUID=u1" in said
    assert "running_since=2026-11-28T10:05:07+00:00" in said


def test_an_active_report_fenced_by_a_newer_epoch_claims_no_ownership() -> None:
    # chaos-1's new process opened the target it found (task 5 at epoch 2) while task 5 had already
    # been handed to chaos-0 at epoch 3, whose fence is in the store: chaos-1 reports it fenced
    fenced = _member("chaos-1", "u1", "2026-11-28T10:05:09Z", "2026-11-28T10:05:15Z", [5])
    fenced["status"]["tasks"][0]["fencedBy"] = 3
    members = [fenced, _member("chaos-0", "u0", "2026-11-28T09:59:58Z", "2026-11-28T10:05:09Z", [5])]
    pods = [
        _pod("chaos-1", "u1", "2026-11-28T10:05:07+00:00"),
        _pod("chaos-0", "u0", "2026-11-28T09:59:50+00:00"),
    ]
    assert double_actives(current_reports(members, pods)) == {}


def test_the_history_keeps_each_members_versions_when_what_they_say_changes() -> None:
    """A double owner's evidence shows how both members got there: each member's versions, kept when
    its target or report changed (not at every poll)."""
    observer = Observer(None, "ns", "chaos", None, 4)  # type: ignore[arg-type]
    first = _member("chaos-0", "u0", "2026-11-28T10:00:00Z", "2026-11-28T10:00:01Z", [0])
    observer._remember([first])
    observer._remember([first])
    moved = _member("chaos-0", "u0", "2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z", [])
    observer._remember([moved, _member("chaos-1", "u1", "2026-11-28T10:00:00Z", "2026-11-28T10:00:05Z", [0])])
    assert [line.split(" ", 2)[1] for line in observer.history] == ["chaos-0", "chaos-0", "chaos-1"]
    assert "active [0@2]" in member_line(first) and "acked 3" in member_line(first)
    assert "spec gen 3 active [] | acked 3 pod u0" in observer.history[1]
