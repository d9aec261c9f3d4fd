"""The pure parts of applying a target: roles per partition and what counts as released."""

from __future__ import annotations

import pytest

from streamapp.executor.runtime import Target, released_partitions
from streamapp.executor.task import Role


def test_roles_list_every_partition_once() -> None:
    target = Target(active={0: 3}, standby=frozenset({1}), warmup=frozenset({2}), revoke=frozenset({4}))
    assert target.roles() == {0: (Role.ACTIVE, 3), 1: (Role.STANDBY, 0), 2: (Role.WARMUP, 0)}


@pytest.mark.parametrize(
    "target",
    [
        Target(active={0: 1}, standby=frozenset({0})),
        Target(active={0: 1}, revoke=frozenset({0})),
        Target(standby=frozenset({0}), warmup=frozenset({0})),
    ],
)
def test_a_partition_with_two_roles_is_rejected(target: Target) -> None:
    with pytest.raises(ValueError):
        target.roles()


def test_released_are_the_partitions_that_stop_being_active_here() -> None:
    before = {0: Role.ACTIVE, 1: Role.ACTIVE, 2: Role.STANDBY}
    target = Target(active={1: 2}, standby=frozenset({0}), revoke=frozenset({0}))
    assert released_partitions(before, target) == frozenset({0})
