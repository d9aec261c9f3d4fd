"""Hot copies of each task on other members, spread over zones (`standbyReplicas`).

Each task gets min(standbyReplicas, live members − 1) standbys, never on the member that owns or is
about to own it. Copies (active + standby) are balanced with the same capacity-weighted quotas as
active tasks; a standby already in place is kept while its member has room (restoring a standby costs
background I/O, so stickiness matters here too). New standbys go first to a member that already has
the task's state, then round the ring of live members, preferring zones the task does not use yet.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.quotas import quotas
from streamapp.rebalance.roster import Roster


def place_standbys(
    draft: Draft,
    roster: Roster,
    desired: Sequence[int | None],
    replicas: int,
    capacity: Callable[[int], float],
    expected_back: Collection[int] = (),
) -> None:
    """Recompute every task's standbys; members reserved after a loss keep theirs untouched.

    A copy on a reserved member still `expected_back` counts as one of the task's standbys: a bounce
    returns with it, so replacing it at once would restore a copy only to drop it again.
    """
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
    current = dict(actives)
    for copies in draft.standbys:
        for member in copies:
            if member in current:
                current[member] += 1
    copy_quota = quotas(draft.partitions * (1 + per_task), roster.live, capacity, current)
    room = {m: max(0, copy_quota[m] - actives[m]) for m in roster.live}
    kept = _keep(draft, roster, home, room, per_task, expected_back)
    _fill(draft, roster, home, room, kept, per_task)


def _keep(
    draft: Draft,
    roster: Roster,
    home: list[int | None],
    room: dict[int, int],
    per_task: int,
    expected_back: Collection[int],
) -> list[int]:
    """Keep existing standbys with room; returns how many standbys each task kept that count.

    A standby on the member the task is moving to stays until the handoff promotes it in place (it is
    already counted in that member's load as the task's future home); dropping it would make the
    handoff warm the same state up again.
    """
    kept_counts: list[int] = []
    for task in range(draft.partitions):
        kept: list[int] = []
        live_kept = 0
        for member in sorted(draft.standbys[task], key=lambda m: m != home[task]):
            if member in draft.reservations:
                kept.append(member)
                if member in expected_back:
                    live_kept += 1
            elif (
                member == home[task]
                and member != draft.active[task]
                and roster.is_live(member)
                and live_kept < per_task
            ):
                kept.append(member)
                live_kept += 1
            elif (
                roster.is_live(member)
                and member not in (home[task], draft.active[task], *draft.warmups[task])
                and room[member] > 0
                and live_kept < per_task
            ):
                kept.append(member)
                room[member] -= 1
                live_kept += 1
        draft.standbys[task] = tuple(kept)
        kept_counts.append(live_kept + _handing_over(task, draft, roster, home))
    return kept_counts


def _handing_over(task: int, draft: Draft, roster: Roster, home: list[int | None]) -> int:
    """1 while a live owner hands the task over to a member warming it: the owner keeps the state and,
    once it has let go, is the caught-up copy the next step picks first; a fresh standby placed
    meanwhile would restore the task from scratch. A task merely queued for a warmup is not covered."""
    owner, successor = draft.active[task], home[task]
    return int(
        owner is not None
        and successor != owner
        and successor in draft.warmups[task]
        and roster.is_live(owner)
    )


def _fill(
    draft: Draft, roster: Roster, home: list[int | None], room: dict[int, int], kept: list[int], per_task: int
) -> None:
    """Give every task its missing standbys."""
    ring = roster.live
    position = {m: i for i, m in enumerate(ring)}
    cursor = [0]
    for task in range(draft.partitions):
        owner = home[task]
        start = position[owner] if owner in position else task % len(ring)
        while kept[task] < per_task:
            member = _choose(task, draft, roster, home, room, ring, start)
            if member is None:
                break
            if room[member] <= 0:
                member = _make_room(task, draft, roster, home, room, cursor) or member
            draft.standbys[task] = (*draft.standbys[task], member)
            room[member] -= 1
            kept[task] += 1


def _choose(
    task: int,
    draft: Draft,
    roster: Roster,
    home: list[int | None],
    room: dict[int, int],
    ring: tuple[int, ...],
    start: int,
) -> int | None:
    """A caught-up holder of the task's state in a new zone; else the next member round the ring.

    Walking the ring from the task's home member spreads copies the way replicas are spread on a
    hash ring: with balanced actives every member ends with the same number of copies. A member in a
    zone the task already uses is taken only when no other zone has room (it still protects against
    a pod or node loss), and a member without room only when nobody has room (a copy beats balance).
    """
    excluded = {home[task], draft.active[task], *draft.standbys[task], *draft.warmups[task]}
    used_zones = {roster.zone(m) for m in excluded if m is not None} - {None}

    def fits(member: int) -> bool:
        zone = roster.zone(member)
        return zone is None or zone not in used_zones

    for lag, member in roster.lags_for(task):
        if lag > roster.acceptable_lag:
            break
        if member not in excluded and room.get(member, 0) > 0 and fits(member):
            return member
    same_zone: int | None = None
    no_room: int | None = None
    for step in range(1, len(ring) + 1):
        member = ring[(start + step) % len(ring)]
        if member in excluded:
            continue
        if room[member] > 0 and fits(member):
            return member
        if room[member] > 0 and same_zone is None:
            same_zone = member
        if no_room is None or (fits(member), room[member]) > (fits(no_room), room[no_room]):
            no_room = member
    return same_zone if same_zone is not None else no_room


def _make_room(
    task: int, draft: Draft, roster: Roster, home: list[int | None], room: dict[int, int], cursor: list[int]
) -> int | None:
    """Free a full member for `task` by moving another task's standby to a member with room.

    Kept standbys can corner the fill (three members, each the only legal place for the next task's
    copy; or a new member that is the home of every task still lacking a copy); one such swap is the
    augmenting step that restores balance. The scan resumes where the last swap was found (`cursor`),
    so a fill that needs many swaps stays linear.
    """
    eligible = set(roster.live) - {
        home[task],
        draft.active[task],
        *draft.standbys[task],
        *draft.warmups[task],
    }
    with_room = [m for m in roster.live if room[m] > 0]
    for step in range(draft.partitions):
        other = (cursor[0] + step) % draft.partitions
        copies = draft.standbys[other]
        taken = {home[other], draft.active[other], *copies, *draft.warmups[other]}
        for full in copies:
            if full not in eligible or other == task:
                continue
            spare = next((m for m in with_room if m not in taken), None)
            if spare is not None:
                draft.standbys[other] = tuple(spare if m == full else m for m in copies)
                room[spare] -= 1
                room[full] += 1
                cursor[0] = other + 1
                return full
    return None
