"""A member's data plane played without Spark, for tests and measurements of the operator at scale: the
membership client drives it like the real runtime, copies catch up at a set rate, and, given the app's
played input, active tasks process it at the member's set rate."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from playedinput import PlayedInput
from streamapp.api.member import LocalCopy, StreamAppMemberSpec, TaskReport, TaskRole


@dataclass
class SimulatedDataPlane:
    """A data plane that simulates restore progress and, optionally, processing.

    Copies catch up at `rate` records/s from `state_records` behind, and owners report
    `state_records` as a cold restore's size. `lags` is the member's local state (task → records
    behind); pass the same dict to a restarted member to model a state volume that survived its pod.
    Its batch rounds never hang.

    With `input` (the app's sources and committed offsets, shared by its members) the active tasks
    process what waits on them at `processing_rate` records per busy second, shared among them; the
    owned tasks report their committed offset and input lag, and the member its processed records and
    busy seconds, as an executor does: the figures the operator's autoscaler measures rates from.
    Without it nothing is processed and none of that is reported. The restore rate may change while
    it runs (`set_restore_rate`), so a test can hold copies back and then let them catch up.
    """

    rate: float
    state_records: int
    lags: dict[int, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    input: PlayedInput | None = None
    processing_rate: float = 0.0
    _target: StreamAppMemberSpec | None = None
    _last: float | None = None
    _processed: float = 0.0
    _busy: float = 0.0
    # the membership client's thread and a test changing the restore rate both advance the plane
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def apply(self, target: StreamAppMemberSpec) -> None:
        with self._lock:
            self._advance()
            self._target = target
            for task in (*target.active_epochs(), *target.standby, *target.warmup):
                self.lags.setdefault(task, float(self.state_records))

    def reports(self) -> list[TaskReport]:
        with self._lock:
            self._advance()
            target = self._target
            lags = dict(self.lags)
        if target is None:
            return []
        owned: list[tuple[TaskRole, dict[int, int]]] = [
            ("active", target.active_epochs()),
            ("revoking", target.revoking_epochs()),
        ]
        copies: list[tuple[TaskRole, tuple[int, ...]]] = [
            ("standby", target.standby),
            ("warmup", target.warmup),
        ]
        rows = [self._owned(t, role, e) for role, epochs in owned for t, e in sorted(epochs.items())]
        rows += [
            TaskReport(
                task=t, role=role, epoch=0, applied_seq=0, applied_offset=0, lag=round(lags.get(t, 0.0))
            )
            for role, tasks in copies
            for t in sorted(tasks)
        ]
        return rows

    def restore_rate(self) -> float:
        return self.rate

    def local_copies(self) -> tuple[LocalCopy, ...]:
        """Simulated copies leave no local state behind."""
        return ()

    def set_restore_rate(self, rate: float) -> None:
        """Copies catch up at `rate` from now on (what they restored so far at the old rate stays)."""
        with self._lock:
            self._advance()
            self.rate = rate

    def batch_running_since(self) -> float | None:
        return None

    def processing(self) -> tuple[int, float] | None:
        """Records processed and seconds busy since it started, with an input; None without one (it
        processes nothing it could measure)."""
        if self.input is None:
            return None
        with self._lock:
            return int(self._processed), self._busy

    def _owned(self, task: int, role: TaskRole, epoch: int) -> TaskReport:
        """The report of a task this member owns: where it stands in the input, when there is one."""
        committed, end = self.input.position(task) if self.input is not None else (0, None)
        return TaskReport(
            task=task,
            role=role,
            epoch=epoch,
            applied_seq=0,
            applied_offset=committed,
            input_lag=None if end is None else end - committed,
            lag=0,
            restore_rows=self.state_records if role == "active" else None,
        )

    def _advance(self) -> None:
        """Bring the plane to now (the lock held): the time since it last looked spent processing and
        restoring under the target it had."""
        now = self.clock()
        elapsed = 0.0 if self._last is None else now - self._last
        self._last = now
        target = self._target
        if target is None:
            return
        active = target.active_epochs()
        for task in active:
            self.lags[task] = 0.0
        for task in (*target.standby, *target.warmup):
            self.lags[task] = max(0.0, self.lags.get(task, float(self.state_records)) - self.rate * elapsed)
        if self.input is not None and self.processing_rate > 0 and active:
            done = self.input.process(sorted(active), self.processing_rate * elapsed)
            self._processed += done
            self._busy += done / self.processing_rate
