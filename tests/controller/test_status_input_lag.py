"""Input lag for autoscalers: what the active owners' current pods report, summed (pure)."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest
from reports import digests

from appbody import app_body
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children
from streamapp.controller.metrics import INPUT_LAG_METRIC, Metrics
from streamapp.controller.observe import PodState
from streamapp.controller.status import app_status, input_lag, step_patch
from streamapp.rebalance import Assignment, MemberTarget, Plan, TaskAssignment

APP = StreamApp.from_resource(app_body(uid="app-uid", generation=1, replicas=2, partitions=4))
# Tasks 0, 1 on member 0; 2, 3 on member 1 (task 3 being revoked: its owner still processes it).
ASSIGNMENT = Assignment(
    generation=3,
    tasks=(
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=0, epoch=1, warmups=(1,)),
        TaskAssignment(active=1, epoch=1),
        TaskAssignment(active=1, epoch=1, revoking_since=3, warmups=(0,)),
    ),
)
PODS = {m: PodState(m, f"counts-{m}", f"uid-{m}", True, False, None) for m in (0, 1)}


def member(member_id: int, pod_uid: str, **reports: tuple[str, int]) -> dict[str, Any]:
    """A StreamAppMember body whose status reports task `tN` as (role, inputLag)."""
    tasks = [
        {"task": int(name[1:]), "role": role, "epoch": 1, "lag": 0, "inputLag": lag}
        for name, (role, lag) in reports.items()
    ]
    return {"spec": {"memberId": member_id}, "status": {"podUID": pod_uid, "tasks": tasks}}


def test_sums_the_active_owners_reports() -> None:
    members = [
        member(0, "uid-0", t0=("active", 10), t1=("active", 5), t3=("warmup", 99)),
        member(1, "uid-1", t2=("active", 0), t3=("active", 7)),
    ]
    assert input_lag(ASSIGNMENT, digests(members), PODS) == 22


def test_a_report_from_an_earlier_pod_is_ignored() -> None:
    members = [member(0, "uid-0", t0=("active", 10)), member(1, "uid-1-before-restart", t2=("active", 500))]
    assert input_lag(ASSIGNMENT, digests(members), PODS) == 10


def test_a_report_from_before_the_executor_container_restarted_in_place_is_ignored() -> None:
    """The pod (and its UID) stays; its executor was killed and started again at 00:01:00."""
    restarted = {1: PodState(1, "counts-1", "uid-1", True, False, None, executor_started=60.0)}
    before, after = member(1, "uid-1", t2=("active", 500)), member(1, "uid-1", t2=("active", 8))
    before["status"]["startedAt"] = "1970-01-01T00:00:05Z"
    after["status"]["startedAt"] = "1970-01-01T00:01:00Z"
    assert input_lag(ASSIGNMENT, digests([before]), {**PODS, **restarted}) is None
    assert input_lag(ASSIGNMENT, digests([after]), {**PODS, **restarted}) == 8


def test_only_the_owner_in_the_assignment_counts() -> None:
    """Member 1's last report still lists task 0, which the assignment gives to member 0."""
    members = [member(0, "uid-0", t0=("active", 10)), member(1, "uid-1", t0=("active", 10))]
    assert input_lag(ASSIGNMENT, digests(members), PODS) == 10


def test_nothing_reported_is_none_not_zero() -> None:
    assert input_lag(ASSIGNMENT, digests([]), PODS) is None
    assert input_lag(ASSIGNMENT, digests([member(0, "gone", t0=("active", 3))]), PODS) is None


def test_status_carries_input_lag() -> None:
    result = Plan(assignment=ASSIGNMENT, changed=False, reason="", events=(), wake_at=None, removable=())
    members = [member(0, "uid-0", t0=("active", 4)), member(1, "uid-1", t2=("active", 6))]
    status = step_patch(
        app_status(APP, result, ASSIGNMENT, [], PODS, "2026-01-01T00:00:00Z", digests(members))
    )
    assert status["inputLag"] == 10


def test_gauge_mirrors_input_lag_and_disappears_when_unknown() -> None:
    metrics = Metrics()
    labels = {"namespace": "ns", "app": "counts"}
    metrics.observe_input_lag(labels, 42)
    sample = f'{INPUT_LAG_METRIC}{{app="counts",namespace="ns"}} 42.0'
    assert sample in generate_latest(metrics.registry).decode()
    metrics.observe_input_lag(labels, None)
    metrics.observe_input_lag(labels, None)
    assert f"{INPUT_LAG_METRIC}{{" not in generate_latest(metrics.registry).decode()


def test_member_spec_carries_ranges_and_a_spec_without_them_is_rewritten() -> None:
    target = MemberTarget(active={0: 1, 1: 1, 2: 2, 7: 1}, revoking={9: 1}, standby=(4, 5), warmup=())
    spec = children.member_spec("counts", 0, target, 5, False, ())
    assert (spec["activeTasks"], spec["revokingTasks"], spec["standbyTasks"], spec["warmupTasks"]) == (
        "0-2,7",
        "9",
        "4-5",
        "",
    )
    assert [t["task"] for t in spec["active"]] == [0, 1, 2, 7]
    assert children.same_target(spec, {**spec, "generation": 6})
    written_before_ranges = {k: v for k, v in spec.items() if not k.endswith("Tasks")}
    assert not children.same_target(written_before_ranges, spec)
