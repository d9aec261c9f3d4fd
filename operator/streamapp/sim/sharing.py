"""How a simulated member's capacities are shared by its tasks in one tick: processing and restoring.

A member processes at most `capacity` records a tick over all its tasks (its true rate; None: no limit
beyond what each task wants). Tasks that want less than an equal share keep what they want and the rest
is shared among the others (water-filling): a member busy with one backlogged task still serves its
caught-up tasks, and no capacity is left unused while a task wants more.

A member restores at most its restore throughput, all the copies restoring on it together — blocking
restores of tasks it owns and copies catching up in the background alike — as a real member does: its
restores share its network to the store, or the CPU that applies rows. They share it evenly while they
run (processor sharing): a copy that needs little is done early in the tick and leaves its share to
the others, and a task still starting joins when its start ends. `restore_shares` says, per copy, what
it restored in the tick and when it had all it wanted, which is when a blocking task processes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_EPSILON = 1e-9


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


@dataclass(frozen=True)
class Restored:
    """What one copy restored in a tick (`records`), and the seconds into the tick when it had all it
    wanted (`done_at`; None: it still wants more at the tick's end)."""

    records: float
    done_at: float | None


def restore_shares(
    wants: Mapping[int, float], ready: Mapping[int, float], rate: float, tick: float
) -> dict[int, Restored]:
    """Per copy, what it restores this tick: `wants` records each (up to its remaining lag), from
    `ready` seconds into the tick on (a task still starting; 0 when absent), the member restoring
    `rate` records a second shared evenly among the copies restoring at each moment."""
    left = {task: want for task, want in sorted(wants.items()) if want > _EPSILON}
    # A copy that wants next to nothing has it as soon as it is ready, taking nothing measurable.
    restored = {task: 0.0 if task in left else max(0.0, want) for task, want in sorted(wants.items())}
    done: dict[int, float | None] = {task: ready.get(task, 0.0) for task in restored if task not in left}
    now = 0.0
    while left and now < tick - _EPSILON:
        running = [task for task in left if ready.get(task, 0.0) <= now + _EPSILON]
        joining = min((ready[task] for task in left if task not in running), default=tick)
        if not running:
            now = min(joining, tick)
            continue
        each = rate / len(running)
        first = now + min(left[task] for task in running) / each
        until = min(first, joining, tick)
        for task in running:
            amount = min(left[task], each * (until - now))
            restored[task] += amount
            left[task] -= amount
            if left[task] <= _EPSILON:
                del left[task]
                done[task] = until
        now = until
    done.update(dict.fromkeys(left))
    return {task: Restored(restored[task], done[task]) for task in restored}
