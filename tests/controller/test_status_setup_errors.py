"""An executor that cannot start with the app's spec: its member's report becomes the app's Degraded
condition, and a started executor's first report clears it (pure)."""

from __future__ import annotations

from typing import Any

from reports import digests

from streamapp.api.member import StreamAppMemberStatus, TaskReport
from streamapp.api.streamapp import TaskCounts
from streamapp.controller.observe import PodState
from streamapp.controller.status import SETUP_FAILED, conditions, setup_errors

PODS = {m: PodState(m, f"counts-{m}", f"uid-{m}", False, False, None) for m in (0, 1, 2)}
COUNTS = TaskCounts(unassigned=4)
MISMATCH = "topic clicks has 3 partitions but spec.partitions is 4"


def member(member_id: int, pod_uid: str, error: str | None) -> dict[str, Any]:
    status = StreamAppMemberStatus(pod_uid=pod_uid, setup_error=error)
    return {"spec": {"memberId": member_id}, "status": status.to_dict()}


def test_the_current_pods_setup_errors_are_collected() -> None:
    members = [
        member(0, "uid-0", MISMATCH),
        member(1, "uid-1-before-restart", "old"),
        member(2, "uid-2", None),
    ]
    assert setup_errors(digests(members), PODS) == {0: MISMATCH}


def test_a_setup_error_makes_the_app_degraded_before_it_ever_started() -> None:
    found = {
        c.type: c
        for c in conditions(COUNTS, 2, 0, False, started=False, setup_errors={0: MISMATCH, 1: MISMATCH})
    }
    assert found["Degraded"].status is True
    assert found["Degraded"].reason == SETUP_FAILED
    assert found["Degraded"].message == f"executor of members 0, 1 cannot start: {MISMATCH}"
    assert found["Ready"].status is False


def test_without_setup_errors_a_starting_app_is_not_degraded() -> None:
    found = {c.type: c for c in conditions(COUNTS, 2, 0, False, started=False, setup_errors={})}
    assert (found["Degraded"].status, found["Degraded"].reason) == (False, "Starting")


def test_a_report_clears_an_earlier_setup_error_in_a_merge_patch() -> None:
    report = StreamAppMemberStatus(
        observed_generation=3, pod_uid="uid-0", tasks=(TaskReport(task=1, role="active"),)
    )
    patch = report.merge_patch()["status"]
    assert patch["setupError"] is None
    assert patch["podUID"] == "uid-0" and patch["tasks"] == [{"task": 1, "role": "active"}]
    assert StreamAppMemberStatus.from_dict({k: v for k, v in patch.items() if v is not None}) == report


def test_what_keeps_a_pod_from_running_is_the_reason_its_tasks_are_held() -> None:
    """A Secret that does not exist, a claim no StorageClass provisions: the kubelet and the scheduler
    say why in the pod's status, and the app's conditions repeat it beside the held tasks."""
    from streamapp.controller.observe import pod_problem

    missing_secret = {
        "containerStatuses": [
            {
                "name": "executor",
                "state": {
                    "waiting": {
                        "reason": "CreateContainerConfigError",
                        "message": 'secret "s3-credentials" not found',
                    }
                },
            }
        ]
    }
    no_class = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
            }
        ]
    }
    starting = {
        "containerStatuses": [{"name": "executor", "state": {"waiting": {"reason": "ContainerCreating"}}}]
    }
    secret = pod_problem(missing_secret)
    assert secret == 'CreateContainerConfigError: secret "s3-credentials" not found'
    assert pod_problem(no_class) == (
        "Unschedulable: 0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims."
    )
    assert pod_problem(starting) is None
    held = TaskCounts(active=2, reserved=2)
    found = {c.type: c for c in conditions(held, 2, 1, False, pod_problems={1: secret})}
    assert found["Degraded"].reason == "TasksHeld"
    assert found["Degraded"].message == f"2 tasks are not processed by any member; pod of member 1: {secret}"
    assert found["Ready"].message.endswith(f"; pod of member 1: {secret}")
