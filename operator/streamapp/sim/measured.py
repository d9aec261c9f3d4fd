"""What a simulation run measured, in the JSON keys docs/simulator.md and the benchmarks rely on."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Timeline:
    """Per-tick series for plots: throughput against the input rate, tasks down, warmups, generation;
    and for autoscaling the input rate (records/s), `spec.replicas`, the members whose pod exists and
    the input lag in seconds of processing."""

    time: list[float] = field(default_factory=list)
    throughput_ratio: list[float] = field(default_factory=list)
    tasks_down: list[int] = field(default_factory=list)
    warming: list[int] = field(default_factory=list)
    generation: list[int] = field(default_factory=list)
    input_rate: list[float] = field(default_factory=list)
    replicas: list[int] = field(default_factory=list)
    executors: list[int] = field(default_factory=list)
    lag_seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class SimResult:
    """One protocol's run of one scenario; field names are the JSON contract."""

    scenario: str
    protocol: str
    generations: int
    task_movements: int
    blocking_restore_records: int
    background_restore_records: int
    task_downtime_seconds: float
    max_task_downtime_seconds: float
    longest_standstill_seconds: float
    stall_seconds: float
    max_task_stall_seconds: float
    longest_stall_seconds: float
    double_ownership_violations: int
    converged: bool
    final_spread: int
    time_to_balance_seconds: float | None
    processed_records: int
    throughput_ratio: float
    min_window_throughput_ratio: float
    revocation_timeouts: int
    wasted_warmups: int
    in_place_restarts: int
    stuck_replacements: int
    autoscaler: str
    executor_seconds: float
    lag_over_target_seconds: float | None
    reversals: int
    resizes: int
    worst_lag_seconds: float
    worst_lag_records: int

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict with every key present."""
        return asdict(self)


@dataclass
class ScaleMeter:
    """What an autoscaler costs and delivers, tick by tick: executor-seconds (members whose pod exists,
    starting and draining ones included), seconds with the input lag over its target, the worst lag, and
    the sizes `spec.replicas` went through (a reversal is a change of direction: out after in, or in
    after out).

    The lag is measured in seconds of processing: for each member, the records its tasks have waiting
    over its processing rate, the worst member counting (a task no member processes counts alone)."""

    target: float | None
    executor_seconds: float = 0.0
    over_target: float = 0.0
    worst_seconds: float = 0.0
    worst_records: float = 0.0
    sizes: list[int] = field(default_factory=list)

    def observe(
        self, tick: float, executors: int, lag_seconds: float, lag_records: float, replicas: int
    ) -> None:
        """One tick."""
        self.executor_seconds += executors * tick
        if self.target is not None and lag_seconds > self.target:
            self.over_target += tick
        self.worst_seconds = max(self.worst_seconds, lag_seconds)
        self.worst_records = max(self.worst_records, lag_records)
        if not self.sizes or self.sizes[-1] != replicas:
            self.sizes.append(replicas)

    def reversals(self) -> int:
        """Changes of direction in the sizes."""
        steps = [b - a for a, b in itertools.pairwise(self.sizes)]
        return sum(1 for a, b in itertools.pairwise(steps) if (a > 0) != (b > 0))


def min_window_ratio(
    processed: list[float], tick: float, expected_per_second: float, window: float = 60.0
) -> float:
    """The worst sliding window of `window` seconds, as a fraction of steady-state throughput."""
    if not processed or expected_per_second <= 0:
        return 0.0
    width = max(1, min(len(processed), round(window / tick)))
    total = sum(processed[:width])
    worst = total
    for i in range(width, len(processed)):
        total += processed[i] - processed[i - width]
        worst = min(worst, total)
    return worst / (expected_per_second * width * tick)
