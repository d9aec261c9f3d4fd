"""Input rates that change over time: the traces an autoscaler is judged on.

A trace gives each task's input rate (records/s) at every tick: held steps (a step up and back, a short
spike) or a daily cycle compressed into `period` (from its low point up to its high one and back, a
raised cosine). Noise multiplies the rate by `1 + noise · x`, where `x` is a Gaussian process of unit
variance whose correlation fades over `noise_seconds` (an AR(1) series): real input wanders for tens of
seconds, and white noise per tick would average away within any measurement window. The series comes
from `seed`, so runs with different seeds differ honestly and a recorded seed reproduces a run.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """From `at` seconds on, each task's input is `rate` records/s (until the next step)."""

    at: float
    rate: float


@dataclass(frozen=True)
class Cycle:
    """A compressed day: `low` records/s per task at time 0 and at every `period`, `high` halfway."""

    low: float
    high: float
    period: float

    def rate(self, t: float) -> float:
        """The rate at `t` seconds."""
        return self.low + (self.high - self.low) * (1 - math.cos(2 * math.pi * t / self.period)) / 2


@dataclass(frozen=True)
class Trace:
    """Each task's input rate over time: `steps` or a `cycle` (exactly one), with noise."""

    steps: tuple[Step, ...] = ()
    cycle: Cycle | None = None
    noise: float = 0.0
    noise_seconds: float = 30.0
    seed: int = 0

    def base(self, t: float) -> float:
        """The rate at `t` before noise."""
        if self.cycle is not None:
            return self.cycle.rate(t)
        rate = 0.0
        for step in self.steps:
            if step.at > t:
                break
            rate = step.rate
        return rate

    def series(self, ticks: int, tick: float) -> list[float]:
        """Each task's input rate at ticks 0..ticks-1 (never negative)."""
        generator = random.Random(self.seed)
        keep = math.exp(-tick / self.noise_seconds) if self.noise_seconds > 0 else 0.0
        fresh = math.sqrt(1 - keep * keep)
        wander = generator.gauss(0.0, 1.0)
        rates = []
        for index in range(ticks):
            rates.append(max(0.0, self.base(index * tick) * (1 + self.noise * wander)))
            wander = keep * wander + fresh * generator.gauss(0.0, 1.0)
        return rates
