"""Simulated executors: pods that come and go, local state per task, and what they report.

Positions are in changelog records. A task's changelog ends at `log_end`; a copy is current when
it has applied up to there. An executor processes exactly the active tasks of the last target it
applied, restores before processing when its copy is behind (a *blocking* restore), and tails the
changelog for its standby and warmup copies in the background. A *deaf* executor keeps doing what it did but
applies and acknowledges nothing, until its pod is replaced.

Whether local state survives a pod's death depends on where the member keeps it (`keeps_state`: a
claim does, an emptyDir or nothing does not; see `Workload.local_state`). What survives is current as
of the death — the executor checkpoints its stores when its pod is stopped — so a returning member's
lag is exactly what was committed while it was away: the delta it replays.

Like a real executor, each one measures how long a task stood still when its ownership here began —
from the task's last processing anywhere to its first here — and how it came (`restart`, `handoff`,
`cold`: see `executor.task.resumption`), and reports it with its lags; the operator's rules
(`rebalance.costs`) turn the reports into the costs a rollout's `auto` weighs. It also reports, per
task it owns, how many records a cold copy would restore (the task's changelog, past what the store's
compaction left: `Workload.max_restore_records`), and its
restore rate: the figures a lost member's tasks are weighed by (`rebalance.recovery`). The rate is the
workload's, known from the start: the app ran, and restored, before the simulation's time 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from streamapp.rebalance import MemberTarget, MemberView
from streamapp.rebalance.costs import Sample
from streamapp.sim.contention import StartKind


@dataclass
class Executor:
    """One member: its pod, its local state and its last applied target.

    `started_at` is when its pod last became ready, and `start_kind` how that pod started (None: it
    has run since before time 0; `contention` slows a recently started executor's batches by it);
    `resuming` the active tasks that have not processed here yet, `blocked` the records each active
    task restored here while blocking, and `resumed` how each task's ownership here began
    (`reported_resumed`: as last reported).
    """

    id: int
    zone: str | None
    task_start_seconds: float = 0.0
    reassign_seconds: float = 0.0
    alive: bool = False
    ready_at: float | None = None
    acked: int = 0
    processing: frozenset[int] = frozenset()
    copies: frozenset[int] = frozenset()
    applied: dict[int, float] = field(default_factory=dict)
    reported: dict[int, int] = field(default_factory=dict)
    next_report: float = 0.0
    starting: dict[int, float] = field(default_factory=dict)
    deaf: bool = False
    stalled_since: float | None = None
    keeps_state: bool = True
    started_at: float = 0.0
    start_kind: StartKind | None = None
    resuming: set[int] = field(default_factory=set)
    blocked: dict[int, float] = field(default_factory=dict)
    resumed: dict[int, Sample] = field(default_factory=dict)
    reported_resumed: dict[int, Sample] = field(default_factory=dict)
    restore_rate: float | None = None
    reported_rows: dict[int, int] = field(default_factory=dict)
    fresh: bool = True

    def view(self) -> MemberView:
        """What the operator observes: pod readiness (or a pod on its way to it: `returning`), the last
        lag report, the last acknowledgement."""
        returning = not self.alive and self.ready_at is not None
        return MemberView(
            self.id,
            self.alive,
            self.zone,
            1.0,
            dict(self.reported),
            self.acked,
            returning=returning,
            restore_rows=dict(self.reported_rows),
            restore_rate=self.restore_rate,
            reported=self.fresh,
        )

    def listening(self) -> bool:
        """Whether the executor applies targets at all (its pod is ready and its watch is not deaf)."""
        return self.alive and not self.deaf

    def apply(self, target: MemberTarget | None, generation: int, last_owner: Sequence[int | None]) -> None:
        """Stop revoked tasks (their last batch is committed), start new ones, acknowledge.

        A task that last processed on another member (`last_owner`) also waits `reassign_seconds`.
        """
        if not self.listening():
            return
        active = frozenset(target.active) if target else frozenset()
        for task in active - self.processing:
            moved = last_owner[task] not in (None, self.id)
            self.starting[task] = self.task_start_seconds + (self.reassign_seconds if moved else 0.0)
            self.resuming.add(task)
            self.blocked[task] = 0.0
            self.resumed.pop(task, None)
        for task in self.processing - active:
            self.starting.pop(task, None)
            self.resuming.discard(task)
            self.blocked.pop(task, None)
        self.processing = active
        self.copies = frozenset((*target.standby, *target.warmup)) if target else frozenset()
        for task in set(self.resumed) - active - self.copies:
            del self.resumed[task]
        self.acked = generation

    def resume(self, task: int, at: float, last: float | None, last_owner: int | None) -> None:
        """The task processes here for the first time since its ownership here began, at `at`; it
        last processed at `last` on `last_owner`. Measured as an executor does: a restart when this
        member processed it before its pod last started, a handoff when another did (or this pod
        did) and nothing was restored while blocking, cold otherwise."""
        self.resuming.discard(task)
        if last is None:
            return
        if last_owner == self.id and last < self.started_at:
            by = "restart"
        else:
            by = "handoff" if self.blocked.get(task, 0.0) == 0 else "cold"
        self.resumed[task] = Sample(by, round(max(0.0, at - last), 1))

    def die(self) -> None:
        """The pod is gone: nothing runs; local state stays only if it is on a claim."""
        if not self.keeps_state:
            self.applied = {}
        self.alive = False
        self.stalled_since = None
        self.processing = frozenset()
        self.copies = frozenset()
        self.starting = {}
        self.resuming = set()
        self.blocked = {}
        self.resumed = {}

    def spend_start(self, task: int, tick: float) -> float:
        """Seconds of this tick the task still spends starting up (0 once it has started)."""
        remaining = self.starting.get(task, 0.0)
        spent = min(remaining, tick)
        if remaining - spent > 0:
            self.starting[task] = remaining - spent
        else:
            self.starting.pop(task, None)
        return spent

    def start_pod(self, ready_at: float, kind: StartKind) -> None:
        """A pod is scheduled, started the way `kind` says; it becomes ready at `ready_at` and then
        applies targets."""
        self.ready_at = ready_at
        self.start_kind = kind

    def become_ready(self, now: float) -> bool:
        """Turn ready when the pod's start time has come; True when it just did.

        Reports made before the restart are dropped: until the new pod reports, nobody knows what
        state survived, and a stale "lag 0" would hand it a task it must then restore while blocking.
        """
        if self.alive or self.ready_at is None or now < self.ready_at:
            return False
        self.alive = True
        self.deaf = False
        self.ready_at = None
        self.started_at = now
        self.acked = 0
        self.reported = {}
        self.reported_resumed = {}
        self.fresh = False
        self.next_report = now
        return True

    def report(self, log_end: list[float], now: float, interval: float, colds: Sequence[float]) -> bool:
        """Report lags for every task with local state, and how tasks resumed here, when the interval
        is due; True if the lags changed. `colds` says, per task, where a copy without local state
        starts (what the store's compaction left): no copy is further behind than that."""
        if not self.alive or now < self.next_report:
            return False
        self.next_report = now + interval
        self.fresh = True
        lags = {
            task: round(log_end[task] - max(position, colds[task])) for task, position in self.applied.items()
        }
        for task in self.copies:
            lags.setdefault(task, round(log_end[task] - colds[task]))
        rows = {task: round(log_end[task] - colds[task]) for task in self.processing}
        changed = lags != self.reported or rows.keys() != self.reported_rows.keys()
        self.reported = lags
        self.reported_rows = rows
        self.reported_resumed = dict(self.resumed)
        return changed
