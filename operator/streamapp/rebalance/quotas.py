"""How many tasks each member should own when balanced, weighted by capacity.

Largest-remainder apportionment: every member gets the floor of its exact share and the leftover tasks
go to the largest fractional parts. Ties go to the member that already owns more, so a quota never
forces a move that stickiness could avoid; the id settles what is left, keeping the result
deterministic. With equal capacities this is Kafka's ⌊N/W⌋ with N mod W members allowed one more.
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
    by_claim = sorted(members, key=lambda m: (-(shares[m] - base[m]), -current.get(m, 0), m))
    for m in by_claim[:leftover]:
        base[m] += 1
    return base
