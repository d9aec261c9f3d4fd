"""A simulated member's restores share its restore throughput, as a real member's do."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamapp.sim.scenario import parse_scenario
from streamapp.sim.sharing import restore_shares
from streamapp.sim.simulator import simulate


def test_restores_side_by_side_share_the_throughput_evenly_while_they_run() -> None:
    """10 records a second, two copies wanting 3 and 10: 5 a second each until the first has its 3
    (at 0.6 s), then the second alone: 3 + 4 = 7 by the tick's end, and it wants more."""
    granted = restore_shares({1: 3.0, 2: 10.0}, {}, 10.0, 1.0)
    assert granted[1].records == pytest.approx(3.0) and granted[1].done_at == pytest.approx(0.6)
    assert granted[2].records == pytest.approx(7.0) and granted[2].done_at is None


def test_a_task_still_starting_joins_when_its_start_ends() -> None:
    """A blocking restore whose task starts until 0.5 s leaves the copy beside it the whole throughput
    until then; a copy that wants nothing is done when it is ready."""
    granted = restore_shares({1: 10.0, 2: 10.0, 3: 0.0}, {2: 0.5, 3: 0.25}, 10.0, 1.0)
    assert granted[1].records == pytest.approx(7.5) and granted[2].records == pytest.approx(2.5)
    assert granted[3].records == 0.0 and granted[3].done_at == 0.25


@given(
    st.dictionaries(st.integers(0, 20), st.floats(0, 1e6), max_size=8),
    st.floats(1.0, 1e6),
    st.sampled_from([0.5, 1.0, 5.0]),
)
def test_the_throughput_is_shared_without_waste(wants: dict[int, float], rate: float, tick: float) -> None:
    """Every copy gets at most what it wants; together they restore the member's throughput over the
    tick, or all they want; a copy that got all it wanted says when, within the tick."""
    granted = restore_shares(wants, {}, rate, tick)
    assert set(granted) == set(wants)
    assert all(0 <= granted[t].records <= wants[t] * (1 + 1e-9) + 1e-9 for t in wants)
    assert sum(g.records for g in granted.values()) == pytest.approx(min(rate * tick, sum(wants.values())))
    for task, share in granted.items():
        if share.done_at is None:
            assert share.records < wants[task]
        else:
            assert 0 <= share.done_at <= tick * (1 + 1e-9) and share.records == pytest.approx(wants[task])


def test_two_restores_on_one_member_take_twice_as_long_as_one() -> None:
    """Cooperative with no delay: a member lost for good, its two tasks restored on the one survivor
    while blocking. They share its 100,000 rows a second: each of their 1,000,000 rows takes ~20 s,
    not the ~10 s one alone would take."""
    scenario = parse_scenario(
        {
            "name": "two-restores",
            "partitions": 4,
            "members": 2,
            "duration": 120,
            "workload": {"restoreRate": 100_000, "stateRecords": 1_000_000, "inputRate": 10},
            "rebalance": {"protocol": "cooperative", "scheduledRebalanceMaxDelay": "0s"},
            "events": [{"at": 10, "kill": 1}],
        }
    )
    result = simulate(scenario)[0]
    assert 19 <= result.max_task_downtime_seconds <= 21
    assert 38 <= result.task_downtime_seconds <= 42
