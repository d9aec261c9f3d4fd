"""The CPU contention model (`streamapp.sim.contention`) and the stall it makes the simulator count
(`streamapp.sim.stall`): pure functions, checked on every input hypothesis draws."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamapp.sim.contention import START_KINDS, Contention, Started, StartKind, slowed_share
from streamapp.sim.stall import StallMeter

CALIBRATED = Contention(
    cores=2,
    apps=3,
    cadence=1.05,
    stretch_per_load=0.03,
    idle_load=0.5,
    starting_load={"new": 2.0, "replaced": 4.0, "restarted": 2.0},
    fresh_load=1.8,
    fresh_stretch={"new": 0.5, "replaced": 0.3, "restarted": 0.01},
    fresh_decay_seconds=45,
)

kinds = st.sampled_from(START_KINDS)
ages = st.floats(0, 1e5, allow_nan=False)
started = st.lists(st.tuples(st.one_of(st.none(), kinds), ages), max_size=12)
starting = st.dictionaries(kinds, st.integers(0, 6))
restoring = st.floats(0, 10, allow_nan=False)
weights = st.floats(0, 10, allow_nan=False)
models = st.builds(
    Contention,
    cores=st.floats(0.5, 64, allow_nan=False),
    apps=st.integers(1, 5),
    cadence=st.floats(0.1, 10, allow_nan=False),
    stretch_per_load=st.floats(0, 1, allow_nan=False),
    idle_load=st.floats(0, 5, allow_nan=False),
    starting_load=st.dictionaries(kinds, weights),
    fresh_load=weights,
    restore_load=weights,
    fresh_stretch=st.dictionaries(kinds, st.floats(0, 5, allow_nan=False)),
    fresh_decay_seconds=st.floats(1, 600, allow_nan=False),
)


@given(models, started, starting, restoring, st.sampled_from([None, *START_KINDS]), ages)
def test_more_busy_executors_per_core_never_shorten_a_cadence(
    model: Contention,
    running: list[Started],
    pods: dict[StartKind, int],
    copies: float,
    start: StartKind | None,
    age: float,
) -> None:
    """Adding a running executor, a starting pod or a restoring copy to the cores never makes any
    task's batches come sooner; neither does taking a core away."""
    before = model.load(running, pods, copies)
    busier = [
        model.load([*running, (None, 0.0)], pods, copies),
        model.load(running, {**pods, "replaced": pods.get("replaced", 0) + 1}, copies),
        model.load(running, pods, copies + 1),
        Contention(**{**vars(model), "cores": model.cores / 2}).load(running, pods, copies),
    ]
    for load in busier:
        assert load >= before
        assert model.stretch(load, start, age) >= model.stretch(before, start, age)


@given(models, st.floats(0, 100, allow_nan=False), kinds, ages, ages)
def test_a_fresh_executor_warms_up_and_never_runs_faster_than_a_warm_one(
    model: Contention, load: float, start: StartKind, age: float, later: float
) -> None:
    """Its own batches: no faster than a warm executor's, never slower as it ages."""
    assert model.stretch(load, start, age) >= model.stretch(load, None, age)
    assert model.stretch(load, start, age + later) <= model.stretch(load, start, age)


@given(models, started, starting, restoring, st.sampled_from([None, *START_KINDS]), ages)
def test_without_a_stretch_per_load_or_fresh_stretch_nothing_slows(
    model: Contention,
    running: list[Started],
    pods: dict[StartKind, int],
    copies: float,
    start: StartKind | None,
    age: float,
) -> None:
    """The defaults of every key but `cores` slow nothing: the simulator's figures stay its downtime."""
    quiet = Contention(cores=model.cores, apps=model.apps, starting_load=model.starting_load)
    assert quiet.stretch(quiet.load(running, pods, copies), start, age) == 0.0


def test_load_counts_every_app_on_the_cores_and_weighs_each_executor_by_how_it_runs() -> None:
    """Three apps of one warm executor and one new pod starting each, on two cores: 3 × (1 + 2) / 2;
    a replaced pod weighs its own load, a kind without one weighs as a running executor, an executor
    that just started weighs 1 + fresh_load, decaying."""
    assert CALIBRATED.load([(None, 0.0)], {"new": 1}, 0.0) == pytest.approx(4.5)
    assert CALIBRATED.load([], {"replaced": 1}, 0.0) == pytest.approx(6.0)
    assert Contention(cores=1).load([], {"new": 2}, 0.0) == 2.0
    assert CALIBRATED.load([("new", 0.0)], {}, 0.0) == pytest.approx(3 * 2.8 / 2)
    assert CALIBRATED.load([("new", 45.0)], {}, 0.0) == pytest.approx(3 * (1 + 1.8 / math.e) / 2)
    assert CALIBRATED.load([(None, 0.0)], {}, 0.0) == pytest.approx(1.5)


def test_stretch_is_a_slope_beyond_the_idle_load_plus_the_executors_own_freshness() -> None:
    assert CALIBRATED.stretch(0.4, None, 0.0) == 0.0
    assert CALIBRATED.stretch(1.5, None, 0.0) == pytest.approx(0.03)
    assert CALIBRATED.stretch(1.5, "new", 0.0) == pytest.approx(0.53)
    assert CALIBRATED.stretch(1.5, "new", 45.0) == pytest.approx(0.03 + 0.5 / math.e)


@given(st.floats(0, 1e3, allow_nan=False), st.floats(0, 1e3, allow_nan=False))
def test_the_slowed_share_of_a_processing_task_grows_with_the_stretch_and_stays_below_one(
    stretch: float, more: float
) -> None:
    assert 0.0 <= slowed_share(stretch) < 1.0
    assert slowed_share(stretch + more) >= slowed_share(stretch)


def test_a_gap_twice_the_cadence_is_half_stall() -> None:
    assert slowed_share(1.0) == 0.5


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.floats(0, 2, allow_nan=False)), min_size=1, max_size=60
    )
)
def test_without_a_stretch_the_stall_is_the_downtime(steps: list[tuple[int, bool, float]]) -> None:
    """Fed what a tick did with a stretch of 0, the meter's figures are the downtime's: its sum, the
    worst task and the longest stand-still."""
    meter = StallMeter(4, cadence=1.05)
    downtime, standing, longest = [0.0] * 4, [0.0] * 4, 0.0
    for task, processed, seconds in steps:
        meter.stood(task, seconds)
        downtime[task] += seconds
        standing[task] += seconds
        if processed:
            longest = max(longest, standing[task])
            standing[task] = 0.0
            meter.processed(task, 1.0, 0.0)
    assert meter.total() == sum(downtime)
    assert meter.worst_task() == max(downtime)
    assert meter.longest_gap() == max(longest, *standing)


def test_slowed_batches_count_their_share_and_end_a_stand_still_late() -> None:
    """Ten seconds of batches stretched by a quarter lose 2 s; a 3-s stand-still ended by such a
    batch is a gap 3 s plus a quarter of the cadence long beyond the cadence."""
    meter = StallMeter(2, cadence=1.0)
    for _ in range(10):
        meter.processed(0, 1.0, 0.25)
    meter.stood(1, 3.0)
    meter.processed(1, 1.0, 0.25)
    assert meter.per_task[0] == pytest.approx(2.0)
    assert meter.per_task[1] == pytest.approx(3.2)
    assert meter.total() == pytest.approx(5.2)
    assert meter.worst_task() == pytest.approx(3.2)
    assert meter.longest_gap() == pytest.approx(3.25)
