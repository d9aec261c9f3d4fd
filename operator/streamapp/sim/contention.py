"""CPU contention: how far a task's batches fall behind their cadence when executors share the cores.

The simulator's downtime counts only the time in which no member processes a task. On real executors
most of what a rebalance costs is elsewhere: batches that still run, slowed by what else runs on the
same cores — a new executor's JVM starting, a copy restoring, several apps' executors side by side
(bench/results/cluster.md: 1.7 of 111 task-seconds of a scale-out were at the moves). This model says
how much slower, from what the simulator knows each second, so that it can report the stall as the
benchmark measures it: every commit gap's excess over the task's usual cadence.

A task's batches come every `cadence` seconds on a quiet machine. Under contention each gap is
`cadence × (1 + stretch)`: the executor's round (its Spark jobs, the state merge, the commit) waits for
the cores, and a round that outlasts the input's period leaves a longer gap. The stretch has two parts:

- the machine's load, in busy executors per core, counting every app on the cores (`apps`: the
  benchmark runs three apps of the same shape side by side, through the same events at the same
  moments): a running executor weighs 1, and `fresh_load` more just after it started (decaying with
  `fresh_decay_seconds`: its JVM still compiling); a pod starting weighs `starting_load` of its kind
  (its JVM and Spark session coming up; a replaced pod's predecessor shutting down; averaged over
  the start, so a long start of the same work weighs less); a member restoring at its full restore
  throughput `restore_load` (its copies restoring share it). Up to
  `idle_load` the cores absorb it; beyond, the stretch grows with it by `stretch_per_load`;
- the task's own executor, if it started recently: a JVM that has run few rounds runs them slower
  (`fresh_stretch`, by how its pod started, decaying with time constant `fresh_decay_seconds`). How a
  pod started matters: a container restarted in its pod found its claim and restored a delta; a
  replaced or a new pod restored in full and began from colder caches.

Beyond the idle load the model is linear, the fewest parameters that fit the benchmark's calibration
run (bench/clusterbench/stretchfit.py): there, warm executors alone barely slowed each other (about
3% stall at one and a half executors a core, 4–5% at three), while pods starting and executors just
started slowed everyone several times more. With the defaults nothing slows, and the stall is the
downtime. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

StartKind = Literal["new", "replaced", "restarted"]
"""How a member's pod last started: `new` (a member added by a scale-out: a pod and a claim never used
before), `replaced` (the operator deleted the member's pod and made another: a rollout, a revocation
timeout, a stuck member), `restarted` (the member came back by itself after a `kill`: its container
restarted in its pod)."""

START_KINDS: tuple[StartKind, ...] = ("new", "replaced", "restarted")

Started = tuple[StartKind | None, float]
"""A running executor as the model sees it: how its pod last started (None: it has run since before
the scenario, long enough to be warm) and how many seconds ago it became ready."""


@dataclass(frozen=True)
class FreshMember:
    """A member whose executor became ready `ready_before` seconds before the scenario's time 0, after a
    start of `start` kind: the scenario begins right after it came back (a benchmark's phases follow
    one another)."""

    member: int
    ready_before: float
    start: StartKind


@dataclass(frozen=True)
class Contention:
    """The executors' cores and what slows batches on them (see the module's docstring)."""

    cores: float
    apps: int = 1
    cadence: float = 1.0
    stretch_per_load: float = 0.0
    idle_load: float = 0.0
    starting_load: Mapping[StartKind, float] = field(default_factory=dict)
    fresh_load: float = 0.0
    restore_load: float = 0.0
    fresh_stretch: Mapping[StartKind, float] = field(default_factory=dict)
    fresh_decay_seconds: float = 60.0
    fresh: tuple[FreshMember, ...] = ()

    def load(self, running: Sequence[Started], starting: Mapping[StartKind, int], restoring: float) -> float:
        """Busy executors per core when one app has `running` executors (each as it started: a
        recent start weighs more), `starting` pods of each kind (a kind without a `starting_load`
        weighs as a running executor) and `restoring` members restoring (at their full restore
        throughput, however many copies share it: a member restoring for half a second of a
        one-second tick counts a half), and every app sharing the cores has as many."""
        warm = sum(1.0 + self.fresh_load * self._freshness(start, age) for start, age in running)
        pods = sum(self.starting_load.get(kind, 1.0) * count for kind, count in starting.items())
        own = warm + pods + self.restore_load * restoring
        return self.apps * own / self.cores

    def stretch(self, load: float, start: StartKind | None, age: float) -> float:
        """How much longer than the cadence a task's batch gap is, as a fraction of it: at `load`, on an
        executor that became ready `age` seconds ago after a `start` of that kind (None: it has been
        running since before the scenario, long enough to be warm)."""
        own = 0.0 if start is None else self.fresh_stretch.get(start, 0.0) * self._freshness(start, age)
        return self.stretch_per_load * max(0.0, load - self.idle_load) + own

    def _freshness(self, start: StartKind | None, age: float) -> float:
        """1 for an executor that just became ready, decaying to 0; 0 for one warm at time 0."""
        return 0.0 if start is None else math.exp(-max(0.0, age) / self.fresh_decay_seconds)


def slowed_share(stretch: float) -> float:
    """The share of a processing task's time that is stall: each gap of `cadence × (1 + stretch)` is
    `cadence × stretch` beyond the cadence."""
    return stretch / (1.0 + stretch)
