"""The operator's autoscaler in the shell: rates from consecutive reports, the decision in the status
before the size is written to /scale, Events and metrics; and a decision waiting on its own warmups."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from appbody import app_body
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children, supporting
from streamapp.controller.memo import Memo
from streamapp.controller.metrics import Metrics
from streamapp.controller.observe import Observed, PodState
from streamapp.controller.reconcile import reconcile
from streamapp.controller.scaling import RATE_WINDOW, Rates, Sample, TaskSample, facts, sample
from streamapp.rebalance import Assignment, MemberView, TaskAssignment, member_targets

AUTOSCALING = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "target": {"utilization": 80}}
APP = app_body(uid="app-uid", generation=1, replicas=2, partitions=4, autoscaling=AUTOSCALING)
APP["metadata"]["resourceVersion"] = "1"
MODEL = StreamApp.from_resource(APP)


def test_rates_count_a_task_only_between_reports_of_one_process() -> None:
    rates = Rates()
    rates.add(Sample(0.0, {0: TaskSample("a", 1_000, 900), 1: TaskSample("b", 500, 500)}, {0: ("a", 0, 0.0)}))
    assert rates.input_rate() is None
    later = {0: TaskSample("a", 4_000, 3_900), 1: TaskSample("c", 9_000, 9_000)}  # task 1 moved to c
    rates.add(Sample(RATE_WINDOW, later, {0: ("a", 3_000, 1.5)}))
    assert rates.input_rate() == 3_000 / RATE_WINDOW
    assert rates.throughput() == 3_000 / RATE_WINDOW
    assert rates.member_rate(0) == 2_000  # 3,000 records in 1.5 busy seconds
    rates.add(Sample(2 * RATE_WINDOW, later, {0: ("restarted", 10, 0.1)}))
    assert rates.member_rate(0) is None, "a new process's counters start again"


def test_the_newest_input_is_read_between_each_tasks_own_reports() -> None:
    """Reports every 10 s, reconciles every 2.5 s: the newest third of the window read at reconcile
    times could span one report's movement or two; between the reports' own times it is exact. The
    input steps from 100 to 300 rec/s at 60 s."""

    def end(second: float) -> int:
        return round(100 * min(second, 60) + 300 * max(0.0, second - 60))

    rates = Rates()
    seen = []
    for tick in range(0, 29):
        at = tick * 2.5 + 0.5
        reported = float(int(at // 10) * 10)
        rates.add(Sample(at, {0: TaskSample("a", end(reported), 0, reported)}, {}))
        seen.append(rates.recent_input_rate())
    assert seen[:4] == [None] * 4, "no report a third of a window older yet"
    assert set(seen[4:]) == {100.0, 300.0}
    assert seen[-1] == 300.0
    window = rates.input_rate()
    assert window is not None and window < 300.0, "the window's mean still holds the slower input"
    moved = Rates()
    moved.add(Sample(0.0, {0: TaskSample("a", 0, 0, 0.0)}, {}))
    moved.add(Sample(20.0, {0: TaskSample("b", 900, 0, 20.0)}, {}))
    assert moved.recent_input_rate() is None, "no older report of the same process"
    unstamped = Rates()
    unstamped.add(Sample(0.0, {0: TaskSample("a", 0, 0)}, {}))
    unstamped.add(Sample(20.0, {0: TaskSample("a", 900, 0)}, {}))
    assert unstamped.recent_input_rate() is None


def test_anchors_stay_few_and_span_a_window() -> None:
    rates = Rates()
    for second in range(0, 600):
        rates.add(Sample(float(second), {}, {}))
    first, last = rates.anchors[0].at, rates.anchors[-1].at
    assert len(rates.anchors) <= 5 and RATE_WINDOW <= last - first <= 2 * RATE_WINDOW


def test_facts_come_from_the_plan_and_the_reports() -> None:
    assignment = Assignment(
        tasks=(
            TaskAssignment(active=0, epoch=1),
            TaskAssignment(active=0, epoch=1, warmups=(2,)),
            TaskAssignment(active=1, epoch=1),
            TaskAssignment(active=1, epoch=1, revoking_since=3),
        )
    )
    views = [
        MemberView(0, restore_rows={0: 100, 1: 300}, restore_rate=50.0),
        MemberView(1, restore_rows={2: 200}),
        MemberView(2, lags={1: 12_345}),
    ]
    found = facts(MODEL, assignment, views, Rates(), 77, 20.0, "r1")
    assert [(m.id, m.active) for m in found.members] == [(0, 2), (1, 1), (2, 0)]
    assert [(w.task, w.member, w.owner, w.lag) for w in found.warmups] == [(1, 2, 0, 12_345)]
    assert (found.restore_rows, found.restore_rate, found.input_lag, found.pod_start_seconds) == (
        200,
        50.0,
        77,
        20.0,
    )


def test_only_the_current_process_is_sampled() -> None:
    pods = {0: PodState(0, "counts-0", "pod-0", True, False, None)}
    current = member(0, ended=500, applied=400, processed=400, busy=0.2)
    stale = {**member(1, ended=900, applied=900, processed=9, busy=1.0)}
    found = sample(5.0, [current, stale], pods, parse)
    assert set(found.tasks) == {0} and set(found.members) == {0}


@dataclass
class RecordingKube:
    """Takes every write; status patches are merged into the app, /scale writes into its spec."""

    app: dict[str, Any]
    writes: list[tuple[str, Any]] = field(default_factory=list)

    def patch_app_status(
        self, namespace: str, name: str, status: dict[str, Any], *rest: Any
    ) -> dict[str, Any]:
        self.writes.append(("patch_app_status", status))
        self.app = {**self.app, "status": {**(self.app.get("status") or {}), **status}}
        return self.app

    def scale_app(self, namespace: str, name: str, replicas: int) -> None:
        self.writes.append(("scale_app", replicas))
        self.app = {**self.app, "spec": {**self.app["spec"], "replicas": replicas}}

    def event(self, app: Any, reason: str, message: str, warning: bool = False) -> None:
        self.writes.append(("event", reason))

    def __getattr__(self, name: str) -> Any:
        def write(*args: Any, **kwargs: Any) -> None:
            self.writes.append((name, args))

        return write


def parse(body: dict[str, Any]) -> Any:
    from streamapp.controller.observe import member_status

    return member_status(body)


def ready_pod(member_id: int, ready: bool = True) -> dict[str, Any]:
    body = children.pod(MODEL, member_id)
    body["metadata"]["uid"] = f"pod-{member_id}"
    body["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]}
    return body


def member(
    member_id: int, ended: int, applied: int, processed: int, busy: float, tasks: tuple[int, ...] = (0,)
) -> dict[str, Any]:
    body = children.member_object(
        MODEL, member_id, children.member_spec("counts", member_id, None, 1, False, (0,))
    )
    body["metadata"]["resourceVersion"] = f"{member_id}-{processed}"
    body["status"] = {
        "observedGeneration": 1,
        "podUID": f"pod-{member_id}",
        "processedRecords": processed,
        "busySeconds": busy,
        "tasks": [
            {
                "task": t,
                "role": "active",
                "epoch": 1,
                "lag": 0,
                "appliedOffset": applied,
                "inputLag": ended - applied,
            }
            for t in tasks
        ],
    }
    return body


def reports(assignment: Assignment, second: float, version: int) -> tuple[dict[str, Any], ...]:
    """Each member has applied `assignment`; every task's source grows 3,000 records a second while
    the members process 1,000 a second each, busy all the time (their true rate)."""
    bodies = []
    for member_id, target in sorted(member_targets(assignment).items()):
        tasks = tuple(target.active)
        processed = int(1_000 * second)
        body = member(
            member_id, int(3_000 * second), int(1_000 * second / max(1, len(tasks))), processed, second, tasks
        )
        body["spec"]["generation"] = assignment.generation
        body["status"]["observedGeneration"] = assignment.generation
        body["metadata"]["resourceVersion"] = f"{version}-{member_id}"
        bodies.append(body)
    return tuple(bodies)


def test_a_scale_out_is_persisted_then_written_and_then_waits_for_its_members() -> None:
    """Members that fall behind: the decision is written to the status first, then to /scale with a
    ScaledOut Event; while the new members' pods are not ready the next reconciles wait on them and
    write nothing more to /scale."""
    app = copy.deepcopy(APP)
    kube, memo, metrics = RecordingKube(app), Memo(), Metrics()
    observed = Observed(
        app=app,
        pods=(ready_pod(0), ready_pod(1)),
        members=(),
        zones={},
        supporting=tuple(supporting.wanted(MODEL, range(2))),
    )
    second = 100.0
    for version in range(1, 8):
        reconcile(kube, observed, second, metrics, memo=memo)  # type: ignore[arg-type]
        assignment = memo.planned.result.assignment if memo.planned else Assignment()
        second += 10
        observed = replace(observed, app=kube.app, members=reports(assignment, second, version))
        if any(w[0] == "scale_app" for w in kube.writes):
            break
    scaled = [i for i, w in enumerate(kube.writes) if w[0] == "scale_app"]
    assert scaled, kube.app["status"].get("autoscaling")
    assert kube.writes[scaled[0]] == ("scale_app", 4)
    status_write = max(i for i, w in enumerate(kube.writes[: scaled[0]]) if w[0] == "patch_app_status")
    assert kube.writes[status_write][1]["autoscaling"]["replicas"] == 4, "persisted before it is written"
    assert ("event", "ScaledOut") in kube.writes[scaled[0] :]
    assert kube.app["status"]["autoscaling"]["action"] == "ScaleOut"

    kube.writes.clear()
    waiting = replace(
        observed, app=kube.app, pods=(ready_pod(0), ready_pod(1), ready_pod(2, False), ready_pod(3, False))
    )
    for _ in range(3):
        second += 10
        assignment = memo.planned.result.assignment if memo.planned else Assignment()
        reconcile(
            kube,
            replace(waiting, app=kube.app, members=reports(assignment, second, int(second))),
            second,
            metrics,
            memo=memo,
        )  # type: ignore[arg-type]
    shown = kube.app["status"]["autoscaling"]
    assert shown["action"] == "Wait" and "pods of members 2,3" in shown["waitingFor"]
    assert not [w for w in kube.writes if w[0] == "scale_app"]
    exported = metrics.registry.get_sample_value(
        "streamapp_autoscaler_waiting", {"namespace": "ns", "app": "counts"}
    )
    assert exported == 1


def test_an_app_that_does_not_autoscale_shows_and_writes_nothing_of_it() -> None:
    app = app_body(uid="app-uid", generation=1, replicas=2, partitions=4)
    app["metadata"]["resourceVersion"] = "1"
    kube = RecordingKube(app)
    observed = Observed(app=app, pods=(ready_pod(0), ready_pod(1)), members=(), zones={})
    reconcile(kube, observed, 100.0, Metrics(), memo=Memo())  # type: ignore[arg-type]
    assert "autoscaling" not in kube.app["status"] or kube.app["status"]["autoscaling"] is None
    assert not [w for w in kube.writes if w[0] == "scale_app"]
