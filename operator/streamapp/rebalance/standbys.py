"""Hot copies of each task on other members, spread over zones (`standbyReplicas`).

Each task gets min(standbyReplicas, live members − 1) standbys, never on the member that owns or is
about to own it. Copies (active + standby) are balanced with the same capacity-weighted quotas as
active tasks; a standby already in place is kept while its member has room (restoring a standby costs
background I/O, so stickiness matters here too). New standbys go first to a member that already has
the task's state, then to the least-loaded member in a zone the task does not use yet.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.quotas import quotas
from streamapp.rebalance.roster import Roster


def place_standbys(
    draft: Draft,
    roster: Roster,
    desired: Sequence[int | None],
    replicas: int,
    capacity: Callable[[int], float],
) -> None:
    """Recompute every task's standbys; members reserved after a loss keep theirs untouched."""
    per_task = min(replicas, len(roster.live) - 1)
    if per_task <= 0:
        for task in range(draft.partitions):
            draft.standbys[task] = tuple(m for m in draft.standbys[task] if m in draft.reservations)
        return
    home = [d if d is not None else draft.active[t] for t, d in enumerate(desired)]
    actives = {m: 0 for m in roster.live}
    for member in home:
        if member in actives:
            actives[member] += 1
    current = {m: actives[m] + sum(m in s for s in draft.standbys) for m in roster.live}
    copy_quota = quotas(draft.partitions * (1 + per_task), roster.live, capacity, current)
    room = {m: max(0, copy_quota[m] - actives[m]) for m in roster.live}
    kept = _keep(draft, roster, home, room, per_task)
    _fill(draft, roster, home, room, kept, per_task)


def _keep(
    draft: Draft, roster: Roster, home: list[int | None], room: dict[int, int], per_task: int
) -> list[int]:
    """Keep existing standbys with room; returns how many live standbys each task kept."""
    kept_counts: list[int] = []
    for task in range(draft.partitions):
        kept: list[int] = []
        live_kept = 0
        for member in draft.standbys[task]:
            if member in draft.reservations:
                kept.append(member)
            elif (
                roster.is_live(member)
                and member not in (home[task], draft.active[task])
                and room[member] > 0
                and live_kept < per_task
            ):
                kept.append(member)
                room[member] -= 1
                live_kept += 1
        draft.standbys[task] = tuple(kept)
        kept_counts.append(live_kept)
    return kept_counts


def _fill(
    draft: Draft, roster: Roster, home: list[int | None], room: dict[int, int], kept: list[int], per_task: int
) -> None:
    """Give every task its missing standbys, most room first."""
    heap = [(-room[m], m) for m in roster.live if room[m] > 0]
    heapq.heapify(heap)
    for task in range(draft.partitions):
        while kept[task] < per_task:
            member = _choose(task, draft, roster, home, room, heap)
            if member is None:
                break
            draft.standbys[task] = (*draft.standbys[task], member)
            room[member] -= 1
            kept[task] += 1
            if room[member] > 0:
                heapq.heappush(heap, (-room[member], member))


def _choose(
    task: int,
    draft: Draft,
    roster: Roster,
    home: list[int | None],
    room: dict[int, int],
    heap: list[tuple[int, int]],
) -> int | None:
    """A caught-up holder of the task's state in a new zone; else the roomiest member in a new zone.

    Falls back to the roomiest member in an already-used zone: a standby in the same zone still
    protects against a pod or node loss.
    """
    excluded = {home[task], draft.active[task], *draft.standbys[task]}
    used_zones = {roster.zone(m) for m in excluded if m is not None} - {None}

    def fits(member: int) -> bool:
        zone = roster.zone(member)
        return zone is None or zone not in used_zones

    for lag, member in roster.lags_for(task):
        if lag > roster.acceptable_lag:
            break
        if member not in excluded and room.get(member, 0) > 0 and fits(member):
            return member
    popped: list[tuple[int, int]] = []
    chosen: int | None = None
    fallback: int | None = None
    while heap:
        entry = heapq.heappop(heap)
        neg_room, member = entry
        if -neg_room != room[member] or room[member] <= 0:
            continue
        popped.append(entry)
        if member in excluded:
            continue
        if fits(member):
            chosen = member
            break
        if fallback is None:
            fallback = member
    for entry in popped:
        heapq.heappush(heap, entry)
    return chosen if chosen is not None else fallback
