"""The PySpark runtime as the membership client drives it (its `DataPlane`), with the executor's metrics."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from streamapp.api.member import (
    BATCH_NOTICE_SECONDS,
    LOCAL_COPIES_REPORTED,
    LocalCopy,
    StreamAppMemberSpec,
    TaskReport,
    TaskRole,
)
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.task import Role, TaskStatus
from streamapp.processmetrics import register_process_metrics

# How the runtime's roles are spelled in a member's status (a revoked task is released at once).
REPORTED_ROLES: dict[Role, TaskRole] = {Role.ACTIVE: "active", Role.STANDBY: "standby", Role.WARMUP: "warmup"}


class RuntimeDataPlane:
    """The PySpark runtime behind the membership client's `DataPlane` protocol, with metrics."""

    def __init__(self, executor: Executor, registry: CollectorRegistry) -> None:
        self.executor = executor
        register_process_metrics(registry)
        self.lag = Gauge(
            "streamapp_executor_task_lag",
            "Records a copy still has to apply",
            ["task", "role"],
            registry=registry,
        )
        self.offset = Gauge(
            "streamapp_executor_applied_offset",
            "Input offset applied; its rate() is records processed (active) or restored (copies) per second",
            ["task", "role"],
            registry=registry,
        )
        self.restored = Gauge(
            "streamapp_executor_restored_rows",
            "Rows restored from the shared store since the task came to this member: blocking (while "
            "active, before it could process) or background (as a standby or warmup)",
            ["task", "mode"],
            registry=registry,
        )
        self.full_restores = Counter(
            "streamapp_executor_full_restores",
            "Restores in full by a copy that had local state of its task (never silent): "
            "checkpoint-unusable, history-changed, delta-expired or delta-larger",
            ["reason"],
            registry=registry,
        )
        self.full_restore_totals = Totals(self.full_restores, "reason")
        self.committed_records = Counter(
            "streamapp_executor_committed_records",
            "Input records the active task committed on this executor",
            ["task"],
            registry=registry,
        )
        self.committed_totals = Totals(self.committed_records, "task")
        self.last_commit = Gauge(
            "streamapp_executor_last_commit_timestamp_seconds",
            "When the active task's last batch committed (an alert: no commit for N batch intervals)",
            ["task"],
            registry=registry,
        )
        self.step_seconds = Histogram(
            "streamapp_executor_step_seconds",
            "One round of batches: one micro-batch per due active task, in one Spark job",
            registry=registry,
        )
        self.round_began: float | None = None  # wall clock, while a round runs (`_work`)
        self.busy = 0.0  # seconds batch rounds ran, since the executor started
        self.processed = 0  # input records its active tasks committed, since the executor started

    @contextlib.contextmanager
    def batch_round(self) -> Iterator[None]:
        """Time one round of batches, and know while it runs when it began (`batch_running_since`)."""
        self.round_began = time.time()
        started = time.monotonic()
        try:
            with self.step_seconds.time():
                yield
        finally:
            self.round_began = None
            self.busy += time.monotonic() - started

    def batch_running_since(self) -> float | None:
        """When the running round began, once it has run over `BATCH_NOTICE_SECONDS`: a round that
        hangs (a stuck Spark) is what the operator's `batchTimeout` replaces the member for."""
        began = self.round_began
        return began if began is not None and time.time() - began > BATCH_NOTICE_SECONDS else None

    def apply(self, target: StreamAppMemberSpec) -> None:
        """Revoked tasks commit and stop inside `Executor.apply`, before the acknowledgement."""
        self.executor.apply(Target.of(target))

    def restore_rate(self) -> float | None:
        return self.executor.restore_rate()

    def local_copies(self) -> tuple[LocalCopy, ...]:
        kept = self.executor.kept_copies(LOCAL_COPIES_REPORTED)
        return tuple(LocalCopy(task=task, applied_offset=offset) for task, offset in kept.items())

    def processing(self) -> tuple[int, float] | None:
        """Records committed and seconds of batch rounds since start (busy time: a round with nothing
        due ends at once), counted as `reports` last saw the commits."""
        return self.processed, self.busy

    def reports(self) -> list[TaskReport]:
        rows = []
        self.lag.clear()
        self.offset.clear()
        self.restored.clear()
        statuses = self.executor.status()
        for s in statuses:
            rows.append(
                TaskReport(
                    task=s.partition,
                    role=REPORTED_ROLES[s.role],
                    epoch=s.epoch,
                    applied_seq=s.applied_seq,
                    applied_offset=s.applied_offset,
                    lag=s.lag,
                    input_lag=s.input_lag,
                    store_epoch=s.store_epoch,
                    fenced_by=s.fenced_by,
                    restored_blocking=s.restored_blocking,
                    restored_background=s.restored_background,
                    resumed_after=round(s.resumed.seconds, 1) if s.resumed is not None else None,
                    resumed_by=s.resumed.by if s.resumed is not None else None,
                    restore_rows=s.restore_rows,
                    full_restores=s.full_restores or None,
                    full_restore_reason=s.full_restore_reason,
                )
            )
            self.restored.labels(task=str(s.partition), mode="blocking").set(s.restored_blocking)
            self.restored.labels(task=str(s.partition), mode="background").set(s.restored_background)
            self.lag.labels(task=str(s.partition), role=s.role.value).set(s.lag)
            self.offset.labels(task=str(s.partition), role=s.role.value).set(s.applied_offset)
        self._count_full_restores()
        self._count_commits(statuses)
        return rows

    def _count_commits(self, statuses: list[TaskStatus]) -> None:
        """The records each task committed here, and when it last committed."""
        self.last_commit.clear()
        for s in statuses:
            self.processed += self.committed_totals.report(str(s.partition), s.committed_records)
            if s.last_commit_at is not None:
                self.last_commit.labels(task=str(s.partition)).set(s.last_commit_at)

    def _count_full_restores(self) -> None:
        """The full restores counted so far (`RestoreMeter.fell_back`), by reason."""
        for reason, count in self.executor.full_restore_counts().items():
            self.full_restore_totals.report(reason, count)


class Totals:
    """A Counter fed with running totals the data plane keeps, one per value of `label`: each report
    adds what grew since the last. A total that went down (a task back on this executor counts from
    zero again) adds all of itself."""

    def __init__(self, counter: Counter, label: str) -> None:
        self.counter = counter
        self.label = label
        self.seen: dict[str, int] = {}

    def report(self, value: str, total: int) -> int:
        """Add what `value`'s total grew by since its last report; returns it."""
        seen = self.seen.get(value, 0)
        grown = total - seen if total >= seen else total
        if grown:
            self.counter.labels(**{self.label: value}).inc(grown)
        self.seen[value] = total
        return grown
