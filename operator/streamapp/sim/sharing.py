"""How a simulated member's processing capacity is shared by the tasks it owns in one tick.

A member processes at most `capacity` records a tick over all its tasks (its true rate; None: no limit
beyond what each task wants). Tasks that want less than an equal share keep what they want and the rest
is shared among the others (water-filling): a member busy with one backlogged task still serves its
caught-up tasks, and no capacity is left unused while a task wants more.
"""

from __future__ import annotations

from collections.abc import Mapping


def shares(wants: Mapping[int, float], capacity: float | None) -> dict[int, float]:
    """Records each task processes this tick, given what each wants and the member's capacity."""
    if capacity is None or sum(wants.values()) <= capacity:
        return dict(wants)
    granted: dict[int, float] = {}
    left = capacity
    waiting = sorted(wants, key=lambda task: (wants[task], task))
    for index, task in enumerate(waiting):
        granted[task] = min(wants[task], left / (len(waiting) - index))
        left -= granted[task]
    return granted
