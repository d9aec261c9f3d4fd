"""The operator's autoscaler in the shell (spec.autoscaling): facts from the reports, the decision core,
and what the status says of it (functional core; the act writes /scale: `controller.reconcile`).

The decision itself is `rebalance.autoscaler.decide`, pure and the same as the simulator's. What this
module adds is what only the operator sees:

- **Rates from consecutive reports.** The input rate is how fast the tasks' source ends move (an active
  copy's applied offset plus its input lag), the throughput how fast their applied offsets do, each
  member's true rate its processed records over its busy seconds (the counters its executor reports,
  `processedRecords` and `busySeconds`), all over `RATE_WINDOW` seconds; the input also over the newest
  third of it, between each task's own reports (`Rates.recent_input_rate`), so that a step up is seen
  before the whole window has seen it. A task is counted only between
  two reports of the same active copy's figures, so a task that moved is not read as a jump; a member
  only between two reports of the same process (its counters start again with it). The samples live in
  the app's loop (`Rates`, kept on its `Memo`): after an operator restart nothing is decided until a
  window of reports is in, while the decision's own state (what it waits for) is in the status.
- **The facts' other half** from the plan: each member's ready pod and active tasks, the warmups with
  their members' reported lags, the owners' reported restore rows, the members' restore rates, the pods'
  start time, the pod revision.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from streamapp.api.member import StreamAppMemberStatus
from streamapp.api.streamapp import AutoscalingStatus, StreamApp
from streamapp.controller.observe import Body, PodState, epoch_seconds
from streamapp.rebalance import Assignment, MemberView
from streamapp.rebalance.autoscaler import (
    AutoscalerState,
    MemberRate,
    ScaleDecision,
    ScaleFacts,
    WarmupLag,
    decide,
)

RATE_WINDOW = 30.0
"""Seconds the rates are measured over (at least; the oldest sample at most 2x older)."""


@dataclass(frozen=True)
class TaskSample:
    """A task's active copy's figures in one report: the process that made it, where the source ends
    (applied offset plus input lag), its applied offset, and when the report was written
    (`reportedAt`, epoch seconds; None when it does not say)."""

    process: str
    end: int
    applied: int
    reported: float | None = None


@dataclass(frozen=True)
class Sample:
    """What the reports said at one reconcile: per task whose active copy reported it, its source end and
    applied offset, keyed by the reporting process too; per member, its process and its counters."""

    at: float
    tasks: Mapping[int, TaskSample]
    members: Mapping[int, tuple[str, int, float]]


@dataclass
class Rates:
    """The samples of one app's recent reconciles: a few anchors about a third of the window apart, and
    the newest (memory stays a few samples whatever the reconcile rate)."""

    anchors: list[Sample] = field(default_factory=list)

    def add(self, sample: Sample) -> None:
        """Keep `sample` as the newest; keep an anchor at least a window old, drop older ones."""
        if len(self.anchors) > 1 and sample.at - self.anchors[-2].at < RATE_WINDOW / 3:
            self.anchors[-1] = sample  # the newest, not yet a third of a window after the anchor before
        else:
            self.anchors.append(sample)
        while len(self.anchors) > 2 and sample.at - self.anchors[1].at >= RATE_WINDOW:
            self.anchors.pop(0)

    def _span(self) -> tuple[Sample, Sample] | None:
        if len(self.anchors) < 2:
            return None
        first, last = self.anchors[0], self.anchors[-1]
        return (first, last) if last.at > first.at else None

    def input_rate(self) -> float | None:
        """Records a second arriving at the sources of the tasks reported at both ends of the window."""
        return self._task_rate(lambda t: t.end)

    def recent_input_rate(self) -> float | None:
        """Records a second arriving over the newest third of the window, task by task between two of
        its reports (their own times, not the reconciles'): a span of one report interval read at
        reconcile times could count one report's movement or two. None unless every task of the newest
        sample has a report at least a third of a window older from the same process."""
        if not self.anchors:
            return None
        total = 0.0
        for task, now in self.anchors[-1].tasks.items():
            if now.reported is None:
                return None
            then = next(
                (
                    old
                    for sample in reversed(self.anchors[:-1])
                    if (old := sample.tasks.get(task)) is not None
                    and old.process == now.process
                    and old.reported is not None
                    and old.reported <= now.reported - RATE_WINDOW / 3
                ),
                None,
            )
            if then is None or then.reported is None:
                return None
            total += max(0, now.end - then.end) / (now.reported - then.reported)
        return total if self.anchors[-1].tasks else None

    def throughput(self) -> float | None:
        """Records a second the active copies processed."""
        return self._task_rate(lambda t: t.applied)

    def _task_rate(self, position: Callable[[TaskSample], int]) -> float | None:
        span = self._span()
        if span is None:
            return None
        first, last = span
        moved = sum(
            position(now) - position(then)
            for task, now in last.tasks.items()
            if (then := first.tasks.get(task)) is not None and then.process == now.process
        )
        return max(0.0, moved) / (last.at - first.at)

    def member_rate(self, member: int) -> float | None:
        """A member's true rate: records processed over seconds busy across the window (None when it was
        not busy in it, or its process changed)."""
        span = self._span()
        if span is None:
            return None
        then, now = span[0].members.get(member), span[1].members.get(member)
        if then is None or now is None or then[0] != now[0] or now[2] <= then[2]:
            return None
        return max(0, now[1] - then[1]) / (now[2] - then[2])


def sample(
    now: float,
    members: Iterable[Body],
    pods: Mapping[int, PodState],
    parse: Callable[[Body], StreamAppMemberStatus],
) -> Sample:
    """What the members' current processes last reported (a report from an earlier pod or process is
    no measure of the current one)."""
    tasks: dict[int, TaskSample] = {}
    counters: dict[int, tuple[str, int, float]] = {}
    for body in members:
        if "spec" not in body:
            continue
        member = int(body["spec"]["memberId"])
        status = parse(body)
        pod = pods.get(member)
        if pod is None or not pod.made(status.pod_uid, status.started_at):
            continue
        process = f"{status.pod_uid}/{status.started_at}"
        reported = epoch_seconds(status.reported_at)
        if status.processed_records is not None and status.busy_seconds is not None:
            counters[member] = (process, status.processed_records, status.busy_seconds)
        for report in status.tasks:
            if report.role == "active" and report.applied_offset is not None and report.input_lag is not None:
                end = report.applied_offset + report.input_lag
                tasks[report.task] = TaskSample(process, end, report.applied_offset, reported)
    return Sample(now, tasks, counters)


def facts(
    app: StreamApp,
    assignment: Assignment,
    views: Sequence[MemberView],
    rates: Rates,
    input_lag: int | None,
    pod_start: float | None,
    revision: str,
) -> ScaleFacts:
    """The decision's facts: the rates measured, the plan's members and warmups, the reported costs."""
    active: dict[int, int] = {}
    warmups: list[WarmupLag] = []
    lags = {v.id: v.lags for v in views}
    for task, state in enumerate(assignment.tasks):
        if state.active is not None and state.revoking_since is None:
            active[state.active] = active.get(state.active, 0) + 1
        warmups += [WarmupLag(task, m, state.active, lags.get(m, {}).get(task)) for m in state.warmups]
    rows = [r for v in views for r in v.restore_rows.values()]
    restore = [v.restore_rate for v in views if v.restore_rate is not None]
    return ScaleFacts(
        replicas=app.spec.replicas,
        partitions=app.spec.partitions,
        input_rate=rates.input_rate(),
        recent_input_rate=rates.recent_input_rate(),
        throughput=rates.throughput(),
        input_lag=input_lag,
        members=tuple(MemberRate(v.id, v.alive, active.get(v.id, 0), rates.member_rate(v.id)) for v in views),
        warmups=tuple(warmups),
        restore_rows=round(statistics.median(rows)) if rows else None,
        restore_rate=statistics.median(restore) if restore else None,
        pod_start_seconds=pod_start,
        revision=revision,
    )


def autoscale(app: StreamApp, facts: ScaleFacts, now: float) -> ScaleDecision:
    """The decision, from the state the app's status persisted."""
    stored = app.status.autoscaling
    state = AutoscalerState.from_dict(stored.state or {}) if stored is not None else AutoscalerState()
    return decide(app.spec.autoscaling.config(), app.spec.rebalance, facts, state, now)


def status(app: StreamApp, decision: ScaleDecision, now: float) -> AutoscalingStatus:
    """`status.autoscaling` of a decision; `lastScaleTime` moves when it changes the size."""
    stored = app.status.autoscaling
    changes = decision.replicas != app.spec.replicas
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return AutoscalingStatus(
        replicas=decision.replicas,
        action=decision.action,
        reason=decision.reason[:1000],
        waiting_for=decision.waiting_for[:1000] or None,
        needed_replicas=decision.needed,
        last_scale_time=stamp if changes else (stored.last_scale_time if stored is not None else None),
        state=decision.state.to_dict() or None,
    )
