"""The contention model's parameters (`streamapp.sim.contention`), fitted to one recorded run.

Every task's batches, the whole run long, are the data: each gap between two commits of a task on the
same member (a move, or a member that stopped, is a stand-still: the simulator's downtime models
those), its excess over the task's usual cadence (`measure.usual_gap`), summed per member and
`BIN_S`-second stretch into a stall share: the part of that member's task-seconds its gaps spent
beyond their cadence. The model says each gap is the cadence times `1 + s`, so the share is
`s / (1 + s)`, with

    s = stretch_per_load × max(0, load / cores − idle_load)
        + fresh_stretch[kind] × exp(−age / fresh_decay_seconds)
    load = Σ over running executors (1 + fresh_load × exp(−their age / fresh_decay_seconds))
         + Σ over starting pods starting_load[their kind]

over every app at that moment (`occupancy`); `age` and `kind` are the member's own: seconds since its
running stretch began, and how the start before it came about. Both the load of a starting pod and the slowness of a fresh executor
are by kind: in the calibration run they differed by two to ten times between kinds (a replaced
pod's predecessor shuts down as it starts; a new member's start is longest, so the same JVM start
weighs less on average; a restarted container found its local state).

The fit minimises the squared error of the stall share, each stretch weighed by its task-seconds: the
squared error of the stall itself, which is what the simulator is checked on. For a given decay `s` is
linear in `stretch_per_load × idle_load`, `stretch_per_load`, `stretch_per_load × fresh_load`, the
three `stretch_per_load × starting_load`s and the three `fresh_stretch`es, so Gauss-Newton from the least-squares fit of `s` converges in a few
steps; the decay is the one of `DECAYS_S` that fits best. A coefficient the fit makes negative is held
at 0 and the rest fitted again: nothing here makes batches faster, and an idle load below 0 would be
a stretch with nothing running.

Restores are not fitted: in the small regime a restore takes about a tenth of a second, far too little
to tell its load from the noise; `restore_load` stays 0 until a series restores for longer.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from clusterbench import occupancy
from clusterbench.measure import usual_gap
from clusterbench.runner import Run
from streamapp.sim.contention import START_KINDS, StartKind

BIN_S = 5.0
DECAYS_S = (10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0)
NEAR_STILL = 0.95  # a stretch of a member whose gaps were this much excess is capped there


@dataclass(frozen=True)
class Observation:
    """One member's batches over one `BIN_S`-second stretch, and the cores at its middle."""

    stretch: float
    task_seconds: float
    running: tuple[float, ...]  # how long each executor running had been
    starting: dict[StartKind, int]
    kind: StartKind
    age: float


@dataclass(frozen=True)
class Fitted:
    """The model's parameters, and what they were fitted on."""

    stretch_per_load: float
    idle_load: float
    starting_load: dict[StartKind, float]
    fresh_load: float
    fresh_stretch: dict[StartKind, float]
    fresh_decay_seconds: float
    stretches: int
    task_seconds: float


def observations(
    run: Run, found: Sequence[occupancy.Stretch], quiet: Sequence[tuple[float, float]]
) -> list[Observation]:
    """Every member's slowed batches while input flowed, per `BIN_S` seconds (see the docstring); each
    task's cadence is its usual gap in the `quiet` stretches, as the measured stall's."""
    out = []
    for app in run.apps:
        fed = [c for c in app.commits.commits if run.fed_from <= c.at <= run.fed_until]
        binned: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for partition in range(app.partitions):
            cadence = usual_gap(fed, partition, quiet)
            mine = sorted((c for c in fed if c.partition == partition), key=lambda c: c.at)
            for earlier, later in itertools.pairwise(mine):
                gap = later.at - earlier.at
                if earlier.owner != later.owner or gap > occupancy.STOPPED_S:
                    continue
                member = int(later.owner.rsplit("-", 1)[-1])
                totals = binned[(member, int((earlier.at + later.at) / 2 // BIN_S))]
                totals[0] += max(0.0, gap - cadence)
                totals[1] += gap
        for (member, index), (excess, seconds) in sorted(binned.items()):
            middle = (index + 0.5) * BIN_S
            own = occupancy.of_member(found, app.protocol, member, middle)
            if own is None or own.state != "running" or seconds <= 0:
                continue
            share = min(NEAR_STILL, excess / seconds)
            cores = occupancy.moment(found, middle)
            age = middle - own.since
            out.append(
                Observation(share / (1 - share), seconds, cores.running, cores.starting, own.kind, age)
            )
    return out


def fit(found: Sequence[Observation], cores: float) -> Fitted:
    """The parameters that fit `found` best (see the docstring)."""
    best: tuple[float, float, list[float]] | None = None
    for decay in DECAYS_S:
        coefficients, residual = _least_squares(found, cores, decay)
        if best is None or residual < best[0]:
            best = (residual, decay, coefficients)
    assert best is not None
    _, decay, (idle, per_load, per_fresh, *rest) = best
    per_start, fresh = rest[: len(START_KINDS)], rest[len(START_KINDS) :]

    def relative(coefficient: float) -> float:
        return coefficient / per_load if per_load > 0 else 0.0

    return Fitted(
        stretch_per_load=per_load,
        idle_load=relative(idle),
        starting_load={kind: relative(value) for kind, value in zip(START_KINDS, per_start, strict=True)},
        fresh_load=relative(per_fresh),
        fresh_stretch=dict(zip(START_KINDS, fresh, strict=True)),
        fresh_decay_seconds=decay,
        stretches=len(found),
        task_seconds=sum(o.task_seconds for o in found),
    )


GAUSS_NEWTON_STEPS = 50


def _least_squares(found: Sequence[Observation], cores: float, decay: float) -> tuple[list[float], float]:
    """Non-negative least squares of the stall share by elimination: columns whose coefficient comes
    out negative are dropped and the rest fitted again. Returns the coefficients (of `_columns`) and
    the weighted residual."""
    design = np.array([_columns(o, cores, decay) for o in found])
    stretch = np.array([o.stretch for o in found])
    share = stretch / (1 + stretch)
    root = np.sqrt(np.array([o.task_seconds for o in found]))
    coefficients = np.zeros(design.shape[1])
    kept = list(range(design.shape[1]))
    while kept:
        columns = design[:, kept]
        solved, *_ = np.linalg.lstsq(columns * root[:, None], stretch * root, rcond=None)
        for _ in range(GAUSS_NEWTON_STEPS):
            modelled = np.maximum(columns @ solved, 0.0)
            slope = columns / ((1 + modelled) ** 2)[:, None]
            step, *_ = np.linalg.lstsq(
                slope * root[:, None], (share - modelled / (1 + modelled)) * root, rcond=None
            )
            solved = solved + step
        if all(value >= 0 for value in solved):
            coefficients[kept] = solved
            break
        kept = [column for column, value in zip(kept, solved, strict=True) if value >= 0]
    modelled = np.maximum(design @ coefficients, 0.0)
    residual = float(np.sum((root * (share - modelled / (1 + modelled))) ** 2))
    return [float(c) for c in coefficients], residual


def _columns(o: Observation, cores: float, decay: float) -> list[float]:
    """The stretch's terms, each times its coefficient in `_least_squares`."""
    return [
        -1.0,
        len(o.running) / cores,
        sum(math.exp(-age / decay) for age in o.running) / cores,
        *(o.starting.get(kind, 0) / cores for kind in START_KINDS),
        *(math.exp(-o.age / decay) if o.kind == kind else 0.0 for kind in START_KINDS),
    ]
