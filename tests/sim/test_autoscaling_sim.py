"""Autoscaling in the simulator: traces, members' capacity, the model of KEDA and the HPA, and the
operator's autoscaler in the loop."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from streamapp.cli import main
from streamapp.sim.kedahpa import KedaHpa, KedaHpaConfig, Policy, Rules
from streamapp.sim.scalers import StreamAppScaler
from streamapp.sim.scenario import ScenarioError, load_scenario, parse_scenario
from streamapp.sim.sharing import shares
from streamapp.sim.simulator import Simulation
from streamapp.sim.traces import Cycle, Step, Trace

ROOT = Path(__file__).parents[2]
TRACES = ROOT / "bench" / "scenarios" / "autoscale"
SAMPLE = ROOT / "manifests" / "samples" / "keda-prometheus" / "scaledobject.yaml"


def test_traces_hold_steps_and_cycle_from_low_to_high() -> None:
    steps = Trace(steps=(Step(0, 300), Step(600, 900), Step(1200, 300)))
    assert [steps.base(t) for t in (0, 599, 600, 1199, 1200)] == [300, 300, 900, 900, 300]
    cycle = Trace(cycle=Cycle(300, 900, 7200))
    assert (cycle.base(0), round(cycle.base(3600)), round(cycle.base(7200))) == (300, 900, 300)


def test_noise_is_drawn_from_the_seed() -> None:
    noisy = Trace(steps=(Step(0, 300),), noise=0.05)
    one, again, other = (
        noisy.series(600, 1.0),
        noisy.series(600, 1.0),
        replace(noisy, seed=1).series(600, 1.0),
    )
    assert one == again and one != other
    assert 0.9 < sum(one) / len(one) / 300 < 1.1 and min(one) >= 0
    assert Trace(steps=(Step(0, 300),)).series(3, 1.0) == [300, 300, 300]


@given(st.dictionaries(st.integers(0, 20), st.floats(0, 1e6), max_size=8), st.none() | st.floats(0, 1e6))
def test_a_members_capacity_is_shared_without_waste(wants: dict[int, float], capacity: float | None) -> None:
    granted = shares(wants, capacity)
    assert set(granted) == set(wants)
    assert all(0 <= granted[t] <= wants[t] + 1e-6 for t in wants)
    if capacity is None or sum(wants.values()) <= capacity:
        assert granted == wants
    else:
        assert sum(granted.values()) == pytest.approx(capacity)


def sample_hpa() -> KedaHpa:
    return KedaHpa(KedaHpaConfig.from_scaled_object(yaml.safe_load(SAMPLE.read_text())))


def test_the_model_reads_the_projects_keda_sample() -> None:
    config = sample_hpa().config
    assert (config.min_replicas, config.max_replicas, config.threshold) == (1, 12, 50_000)
    assert config.scale_down == Rules(600, (Policy("Pods", 1, 300),))
    assert config.scale_up == Rules(0, (Policy("Percent", 100, 15), Policy("Pods", 4, 15)))
    assert (config.sync, config.tolerance, config.scrape_interval) == (15, 0.1, 30)


def test_the_hpa_proposes_ceil_of_value_over_target_outside_its_tolerance() -> None:
    hpa = sample_hpa()
    assert hpa.sync(0, 105_000, 2, 2) == 2  # 105,000 / (50,000 x 2) = 1.05: within 10 %
    assert hpa.sync(15, 160_000, 2, 2) == 4  # ceil(160,000 / 50,000)


def test_scale_up_is_limited_to_the_larger_of_double_and_four_pods_per_15_s() -> None:
    hpa = sample_hpa()
    assert hpa.sync(0, 10**7, 2, 2) == 6  # max(2 x 2, 2 + 4)
    assert hpa.sync(5, 10**7, 6, 6) == 6  # still within the period that added 4
    assert hpa.sync(16, 10**7, 6, 6) == 12  # a new period: 6 x 2, capped at maxReplicas


def test_scale_down_waits_for_the_window_then_goes_one_pod_per_300_s() -> None:
    hpa = sample_hpa()
    assert hpa.sync(0, 400_000, 8, 8) == 8
    sizes = {}
    replicas = 8
    for now in range(15, 2400, 15):
        replicas = hpa.sync(now, 0, replicas, replicas)
        sizes[now] = replicas
    assert sizes[585] == 8 and sizes[600] == 7  # the 600-s window held the proposal of 8
    assert sizes[885] == 7 and sizes[900] == 6  # then one pod per 300 s
    assert sizes[2385] == 2


def test_the_scenario_keys_of_autoscaling() -> None:
    scenario = load_scenario(TRACES / "step.yaml")
    assert scenario.autoscaler == "streamapp" and scenario.autoscaling.lag_seconds == 20
    assert scenario.keda is not None and scenario.keda.threshold == 50_000
    assert scenario.trace is not None and scenario.trace.steps[1] == Step(600, 900)
    assert scenario.workload.member_rate == 2_500 and scenario.workload.max_restore_records == 300_000
    assert scenario.with_seed(3).trace == replace(scenario.trace, seed=3)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"trace": {"steps": [{"at": 0, "rate": 1}], "cycle": {"low": 1, "high": 2, "period": 60}}},
            "exactly one",
        ),
        ({"trace": {"steps": [{"at": 0, "rate": -1}]}}, "trace.steps[0].rate"),
        ({"trace": {"cycle": {"low": 1, "high": 2}}}, "trace.cycle.period"),
        ({"autoscaling": {"minReplicas": 0}}, "autoscaling.minReplicas"),
        ({"autoscaler": "hpa"}, "autoscaler must be one of"),
        ({"autoscaler": "keda-hpa"}, "needs a keda block"),
        ({"keda": {"scaledObject": "missing.yaml"}}, "cannot read"),
    ],
)
def test_autoscaling_keys_are_checked(changes: dict[str, object], message: str) -> None:
    document = {"name": "x", "partitions": 4, "members": 1, "duration": 10, **changes}
    with pytest.raises((ScenarioError, ValueError), match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_scenario(document, TRACES)


def run(trace: str, autoscaler: str, seed: int = 1) -> Simulation:
    scenario = load_scenario(TRACES / f"{trace}.yaml").with_autoscaler(autoscaler).with_seed(seed)  # type: ignore[arg-type]
    simulation = Simulation(scenario)
    simulation.result = simulation.run()  # type: ignore[attr-defined]
    return simulation


def test_without_an_autoscaler_the_step_falls_behind_and_costs_its_members() -> None:
    result = run("step", "none").result  # type: ignore[attr-defined]
    assert result.executor_seconds == 2 * 3600 and result.resizes == 0
    assert result.lag_over_target_seconds is not None and result.lag_over_target_seconds > 1800


def test_the_operators_autoscaler_sizes_the_step_at_once_and_waits_for_its_warmups() -> None:
    """On the 3x step the first scale-out goes straight to the size it needs (the backlog its own move
    lets build up included), no second scale-out follows while its warmups catch up, and the app
    returns to its base size once the input falls.

    The size it needs is twelve: read at its newest rate, the step's 10,800 rec/s outrun two members
    by 5,800 rec/s for the whole move, and six would then take minutes longer to work that backlog
    down. (Read at the window's mean, 6,023 rec/s eleven seconds into the step, the scale-out went to
    six and a second one to twelve followed: this test expected 6 and allowed the second.)"""
    simulation = run("step", "streamapp")
    sizes = simulation.meter.sizes
    assert sizes[0] == 2 and sizes[1] == 12 and sizes[-1] == 2
    assert sizes == sizes[:1] + sorted(sizes[1:], reverse=True)  # out once, then only in
    scaler = simulation.scaler
    assert isinstance(scaler, StreamAppScaler)
    actions = [d.action for _, d in scaler.decisions]
    out = actions.index("ScaleOut")
    assert actions[out + 1] == "Wait"
    assert any("warmup" in d.waiting_for for _, d in scaler.decisions)
    assert simulation.violations == 0


def test_keda_and_the_hpa_follow_their_lag_and_their_windows() -> None:
    """The lag a step builds scales KEDA's app out in the HPA's steps; the lag gone, it comes down one
    member per 300 s after the 600-s window, and in quiet times down to one member, whose lag scales
    it out again."""
    simulation = run("step", "keda-hpa")
    sizes = simulation.meter.sizes
    assert sizes[:2] == [2, 1]
    assert max(sizes) == 12
    downs = [b for a, b in itertools.pairwise(sizes) if b < a]
    assert all(a - b == 1 for a, b in itertools.pairwise(sizes) if b < a) and downs
    assert simulation.meter.reversals() >= 2


def test_runs_repeat_exactly_and_seeds_make_them_differ() -> None:
    first, again, other = (
        run("spike", "keda-hpa", 1),
        run("spike", "keda-hpa", 1),
        run("spike", "keda-hpa", 2),
    )
    assert first.meter.sizes == again.meter.sizes
    assert first.meter.executor_seconds == again.meter.executor_seconds
    assert (other.meter.executor_seconds, other.meter.worst_records) != (
        first.meter.executor_seconds,
        first.meter.worst_records,
    )


def test_the_cli_runs_a_trace_under_either_autoscaler(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["simulate", str(TRACES / "spike.yaml"), "--autoscaler", "keda-hpa", "--seed", "2", "--json"])
        == 0
    )
    out = capsys.readouterr().out
    assert '"autoscaler": "keda-hpa"' in out and '"executor_seconds"' in out
