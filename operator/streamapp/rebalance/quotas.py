"""How many tasks each member should own when balanced, weighted by capacity.

Largest-remainder apportionment: every member gets the floor of its exact share and the leftover tasks
go to the largest fractional parts. Ties go to a member that already owns at least the larger quota,
so a quota never forces a move that stickiness could avoid; the id settles what is left, keeping the
result deterministic. With equal capacities this is Kafka's ⌊N/W⌋ with N mod W members allowed one more.

How much a member owns counts only as "at least the larger quota" or not. The counts change as a
rebalance proceeds, and a tie-break by the raw count moved the extra task from member to member: an
old member that had given its one task saw its quota drop and gave another, a new member that had
received fewer tasks than another lost its extra one, and warmups were started for tasks that then
stayed or went elsewhere (tests/rebalance/test_convergence.py found scale-outs taking a round or
three more than their bound). Members that own enough keep owning enough until the end, and the
others are ordered by id alone, so the choice stays put; any choice among them moves as many tasks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence


def quotas(
    total: int,
    members: Sequence[int],
    capacity: Callable[[int], float],
    current: Mapping[int, int],
) -> dict[int, int]:
    """Tasks per member summing exactly to `total` (empty when there are no members)."""
    if not members:
        return {}
    weight = sum(capacity(m) for m in members)
    shares = {m: total * capacity(m) / weight for m in members}
    base = {m: math.floor(shares[m]) for m in members}
    leftover = total - sum(base.values())
    by_claim = sorted(members, key=lambda m: (-(shares[m] - base[m]), current.get(m, 0) <= base[m], m))
    for m in by_claim[:leftover]:
        base[m] += 1
    return base
