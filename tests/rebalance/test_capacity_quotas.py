"""Capacity-weighted quotas stay proportional to capacity, whatever the capacities and current loads."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamapp.rebalance.quotas import quotas


@given(
    total=st.integers(0, 5_000),
    capacities=st.lists(st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0, 4.0, 16.0]), min_size=1, max_size=40),
    current=st.lists(st.integers(0, 200), max_size=40),
)
def test_quotas_stay_within_one_task_of_each_members_weighted_share(
    total: int, capacities: list[float], current: list[int]
) -> None:
    members = list(range(len(capacities)))
    owned = dict(enumerate(current))
    quota = quotas(total, members, lambda m: capacities[m], owned)
    weight = sum(capacities)
    assert sum(quota.values()) == total
    for m in members:
        assert abs(quota[m] - total * capacities[m] / weight) < 1
