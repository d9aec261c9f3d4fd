"""Stall as the cluster benchmark measures it: every commit gap's excess over the task's usual cadence.

A real task that stands still for a while shows one long gap between two commits; one whose batches
slow down shows many gaps a little longer than usual. The benchmark counts both alike (each gap's
excess over the cadence, summed), because on two shared cores most of a rebalance's cost was the
second kind (`bench/clusterbench/measure.py`). The simulator processes in ticks, not batches, so this
meter turns what a tick did into the same figures: a tick in which a task did not process adds its
length; a tick of processing at a stretch `s` (`contention`) adds the share of it that its longer
gaps lost. The longest gap's excess is a stand-still plus the slowed batch that ends it.

Without contention (a stretch of 0) the figures are the simulator's downtime, the worst task's
downtime and the longest stand-still, to the same floating-point sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamapp.sim.contention import slowed_share


@dataclass
class StallMeter:
    """Per task: the stall so far and the stand-still under way; the longest gap's excess so far."""

    partitions: int
    cadence: float = 1.0
    per_task: list[float] = field(default_factory=list)
    standing: list[float] = field(default_factory=list)
    longest: float = 0.0

    def __post_init__(self) -> None:
        self.per_task = [0.0] * self.partitions
        self.standing = [0.0] * self.partitions

    def stood(self, task: int, seconds: float) -> None:
        """The task did not process for `seconds` (no owner, or its owner starting or restoring it)."""
        self.per_task[task] += seconds
        self.standing[task] += seconds

    def processed(self, task: int, seconds: float, stretch: float) -> None:
        """The task processed for `seconds` with its batches stretched by `stretch`: a stand-still
        before it ends with this tick's first batch."""
        self.longest = max(self.longest, self.standing[task] + self.cadence * stretch)
        self.standing[task] = 0.0
        self.per_task[task] += seconds * slowed_share(stretch)

    def total(self) -> float:
        """Σ over tasks: task-seconds."""
        return sum(self.per_task)

    def worst_task(self) -> float:
        return max(self.per_task, default=0.0)

    def longest_gap(self) -> float:
        """The longest gap's excess, a stand-still still under way at the end included."""
        return max([self.longest, *self.standing])
