"""A member's data plane played without Spark, for tests and measurements of the operator at scale: the
membership client drives it like the real runtime, and copies catch up at a set rate."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from streamapp.api.member import StreamAppMemberSpec, TaskReport, TaskRole


@dataclass
class SimulatedDataPlane:
    """A data plane that only simulates restore progress: copies catch up at `rate` records/s from
    `state_records` behind, and owners report `state_records` as a cold restore's size.

    `lags` is the member's local state (task → records behind); pass the same dict to a restarted
    member to model a state volume that survived its pod. Its batch rounds never hang.
    """

    rate: float
    state_records: int
    lags: dict[int, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    _target: StreamAppMemberSpec | None = None
    _last: float | None = None

    def apply(self, target: StreamAppMemberSpec) -> None:
        self._advance()
        self._target = target
        for task in (*target.active_epochs(), *target.standby, *target.warmup):
            self.lags.setdefault(task, float(self.state_records))

    def reports(self) -> list[TaskReport]:
        self._advance()
        target = self._target
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
        rows = [
            TaskReport(
                task=t,
                role=role,
                epoch=e,
                applied_seq=0,
                applied_offset=0,
                lag=0,
                restore_rows=self.state_records if role == "active" else None,
            )
            for role, epochs in owned
            for t, e in sorted(epochs.items())
        ]
        rows += [
            TaskReport(
                task=t, role=role, epoch=0, applied_seq=0, applied_offset=0, lag=round(self.lags.get(t, 0.0))
            )
            for role, tasks in copies
            for t in sorted(tasks)
        ]
        return rows

    def restore_rate(self) -> float:
        return self.rate

    def batch_running_since(self) -> float | None:
        return None

    def processing(self) -> tuple[int, float] | None:
        """It processes nothing it could measure."""
        return None

    def _advance(self) -> None:
        now = self.clock()
        elapsed = 0.0 if self._last is None else now - self._last
        self._last = now
        target = self._target
        if target is None:
            return
        for task in target.active_epochs():
            self.lags[task] = 0.0
        for task in (*target.standby, *target.warmup):
            self.lags[task] = max(0.0, self.lags.get(task, float(self.state_records)) - self.rate * elapsed)
