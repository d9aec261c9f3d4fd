"""The contention model's calibration from a recorded run: what ran on the cores when
(bench/clusterbench/occupancy.py) and the model's fit to it (bench/clusterbench/stretchfit.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from clusterbench import occupancy, stretchfit
from clusterbench.apps import BenchApp
from demo.commits import Commit
from streamapp.sim.contention import START_KINDS, StartKind


def app_with(events: list[tuple[float, str]], batches: dict[int, list[float]]) -> BenchApp:
    """An app read back from a record: its events and, per member, the times it committed (one task
    per member)."""
    app = BenchApp("streamapp", Path("/nonexistent"), len(batches), None)
    app.events = events
    app.commits.commits = [
        Commit(member, seq, 0, 0, f"counts-{member}", at)
        for member, times in batches.items()
        for seq, at in enumerate(times)
    ]
    return app


def every_second(since: float, until: float) -> list[float]:
    return [float(t) for t in range(int(since), int(until))]


def test_members_run_while_they_commit_and_start_as_the_events_say() -> None:
    """Two members from the start, a third from a scale-out, member 0 SIGKILLed and back, then lost
    until room again; member 1 replaced in a rollout. Each gap in a member's commits is a start of
    the kind the last event before its end says, or lost between the loss and room again."""
    app = app_with(
        [
            (0.0, "app created: 2 members"),
            (100.0, "scale to 3"),
            (200.0, "SIGKILL m0"),
            (300.0, "m0 lost (pod deleted, no room)"),
            (400.0, "room again"),
            (500.0, "executor.image changed"),
        ],
        {
            0: [*every_second(10, 200), *every_second(250, 300), *every_second(450, 600)],
            1: [*every_second(12, 500), *every_second(570, 600)],
            2: every_second(180, 600),
        },
    )
    found = [(s.member, s.state, s.since, s.until, s.kind) for s in occupancy.stretches(app)]
    assert found == [
        (0, "starting", 0.0, 10.0, "new"),
        (0, "running", 10.0, 199.0, "new"),
        (0, "starting", 199.0, 250.0, "restarted"),
        (0, "running", 250.0, 299.0, "restarted"),
        (0, "lost", 299.0, 400.0, "replaced"),
        (0, "starting", 400.0, 450.0, "replaced"),
        (0, "running", 450.0, 599.0, "replaced"),
        (1, "starting", 0.0, 12.0, "new"),
        (1, "running", 12.0, 499.0, "new"),
        (1, "starting", 499.0, 570.0, "replaced"),
        (1, "running", 570.0, 599.0, "replaced"),
        (2, "starting", 100.0, 180.0, "new"),
        (2, "running", 180.0, 599.0, "new"),
    ]
    stretches = occupancy.stretches(app)
    at_220 = occupancy.moment(stretches, 220.0)
    assert sorted(at_220.running) == [40.0, 208.0] and at_220.starting == {"restarted": 1}
    lost = occupancy.of_member(stretches, "streamapp", 0, 350.0)
    assert lost is not None and lost.state == "lost"


def test_a_slow_batch_is_not_a_stop() -> None:
    """Gaps up to `STOPPED_S` keep a member running; a longer one is a stop and a start."""
    slow = [0.0, 1.0, 1.0 + occupancy.STOPPED_S, 2.0 + occupancy.STOPPED_S, 20.0]
    app = app_with([(0.0, "app created: 1 members")], {0: slow})
    running = [(s.since, s.until) for s in occupancy.stretches(app) if s.state == "running"]
    assert running == [(0.0, 2.0 + occupancy.STOPPED_S), (20.0, 20.0)]


# the parameters the stretches of the fit's test are made with, on 2 cores
PER_LOAD, IDLE, FRESH_LOAD, DECAY = 0.03, 0.5, 1.5, 45.0
STARTING: dict[StartKind, float] = {"new": 2.0, "replaced": 4.0, "restarted": 1.5}
FRESH: dict[StartKind, float] = {"new": 0.6, "replaced": 0.3, "restarted": 0.05}


def modelled(
    running: tuple[float, ...], starting: dict[StartKind, int], kind: StartKind, age: float
) -> float:
    load = sum(1 + FRESH_LOAD * math.exp(-a / DECAY) for a in running)
    load += sum(STARTING[k] * n for k, n in starting.items())
    return PER_LOAD * max(0.0, load / 2 - IDLE) + FRESH[kind] * math.exp(-age / DECAY)


def test_the_fit_finds_the_parameters_that_made_the_stretches() -> None:
    """Stretches made by the model itself, over the mixes of running, starting and fresh executors a
    run goes through: the fit gives back its parameters and its decay."""
    mixes: list[dict[StartKind, int]] = [
        {},
        {"new": 3},
        {"replaced": 2},
        {"restarted": 3},
        {"new": 1, "replaced": 1},
    ]
    found = [
        stretchfit.Observation(modelled(running, starting, kind, age), 5.0, running, starting, kind, age)
        for running in ((500.0,) * 3, (500.0,) * 6, (500.0, 500.0, 10.0, 30.0), (5.0,) * 9, (500.0,) * 4)
        for starting in mixes
        for kind in START_KINDS
        for age in (0.0, 20.0, 60.0, 400.0)
    ]
    fitted = stretchfit.fit(found, cores=2)
    assert fitted.fresh_decay_seconds == DECAY
    assert fitted.stretch_per_load == pytest.approx(PER_LOAD, rel=1e-3)
    assert fitted.idle_load == pytest.approx(IDLE, rel=1e-3)
    assert fitted.fresh_load == pytest.approx(FRESH_LOAD, rel=1e-3)
    assert fitted.starting_load == pytest.approx(STARTING, rel=1e-3)
    assert fitted.fresh_stretch == pytest.approx(FRESH, rel=1e-3)
    assert fitted.stretches == len(found) and fitted.task_seconds == 5.0 * len(found)


def test_the_fit_never_makes_batches_faster() -> None:
    """Stretches that fall as pods start (noise, or another cause) give no negative load: the
    coefficient is held at 0 and the rest fitted without it."""
    found = [
        stretchfit.Observation(0.2 - 0.01 * starting, 5.0, (500.0,) * 3, {"new": starting}, "new", 500.0)
        for starting in range(4)
    ]
    fitted = stretchfit.fit(found, cores=2)
    assert fitted.starting_load["new"] == 0.0
    assert all(value >= 0 for value in (fitted.stretch_per_load, fitted.idle_load, fitted.fresh_load))
