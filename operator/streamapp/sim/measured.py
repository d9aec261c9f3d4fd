"""What a simulation run measured, in the JSON keys docs/simulator.md and the benchmarks rely on."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Timeline:
    """Per-tick series for plots: throughput against the input rate, tasks down, warmups, generation."""

    time: list[float] = field(default_factory=list)
    throughput_ratio: list[float] = field(default_factory=list)
    tasks_down: list[int] = field(default_factory=list)
    warming: list[int] = field(default_factory=list)
    generation: list[int] = field(default_factory=list)


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

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict with every key present."""
        return asdict(self)


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
