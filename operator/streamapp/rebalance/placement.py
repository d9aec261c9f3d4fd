"""Where each task's active copy should live once things settle (sticky, balanced, state-aware).

Two passes, as in Kafka's sticky assignors: first every live owner keeps what it owns up to its quota,
then the rest go to members with room — for the state-aware protocol preferring the member a handoff
in flight is warming, then the one with the most caught-up local state (a standby, a member back from a
bounce or a restart with its claim), and only then the least loaded. A lazy heap keeps the second pass O(T log M), so planning cost
grows with the tasks that move, not with tasks × members.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Mapping

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.roster import Roster


def desired_owners(
    draft: Draft,
    roster: Roster,
    quota: Mapping[int, int] | None,
    held: Collection[int],
    state_aware: bool,
    capacity: Callable[[int], float],
) -> list[int | None]:
    """The balanced owner of every task; None for tasks held for a lost member or with nobody live.

    With `quota` None (a reservation is active) nothing is taken from a live owner: load-balancing
    waits until the lost member returns or its delay expires, and only homeless tasks are placed.
    """
    desired: list[int | None] = [None] * draft.partitions
    if not roster.live:
        return desired
    load = dict.fromkeys(roster.live, 0)
    pending: list[int] = []
    order = _giving_up_warm_first(draft, roster, quota) if state_aware else range(draft.partitions)
    for task in order:
        if task in held:
            continue
        owner = draft.owner(task)
        if owner is not None and owner in load and (quota is None or load[owner] < quota[owner]):
            desired[task] = owner
            load[owner] += 1
        else:
            pending.append(task)
    # Tasks with a warmup in flight are placed first, so a task without state cannot take the room its
    # warming destination kept for it (the warmup would be cancelled and started again elsewhere).
    pending.sort(key=lambda task: (state_aware and not draft.warmups[task], task))
    chooser = _LeastLoaded(load, quota, capacity)
    for task in pending:
        member = _with_state(task, draft, roster, chooser) if state_aware else None
        if member is None:
            member = chooser.least_loaded()
        chooser.take(member)
        desired[task] = member
    return desired


def _giving_up_warm_first(draft: Draft, roster: Roster, quota: Mapping[int, int] | None) -> list[int]:
    """Tasks in the order owners keep them: those warming for, then kept as a standby by, then caught
    up on, a member below its quota come last.

    An owner above its quota gives up the tasks beyond it; giving up the ones already warming for a
    member with room (the plan in flight, never thrown away for another) or that such a member keeps a
    standby of (promoted in place: the standby stays until the handoff, and its member's other copies
    keep their room) or reports caught up on (a member back from a bounce) turns the move into a
    promotion of state already there — the owner's state becomes the copy — instead of a warmup from
    scratch plus a standby moved to make room. Failing those, a task such a member still has local
    state of, however far behind (a member back from a rolling restart, its claim holding the tasks it
    handed off minutes ago), replays only what it missed instead of restoring in full. The number of
    moves is unchanged.
    """
    if quota is None:
        return list(range(draft.partitions))
    owned = dict.fromkeys(roster.live, 0)
    for task in range(draft.partitions):
        owner = draft.owner(task)
        if owner in owned:
            owned[owner] += 1
    below = {m for m in roster.live if owned[m] < quota[m]}
    if not below:  # balanced: every task ranks 0, the order is the tasks' own (the common case)
        return list(range(draft.partitions))

    def giving_up(task: int) -> int:
        if any(member in below for member in draft.warmups[task]):
            return 4
        if any(member in below for member in draft.standbys[task]):
            return 3
        owner = draft.owner(task)
        holders = [(lag, m) for lag, m in roster.lags_for(task) if m in below and m != owner]
        if any(lag <= roster.acceptable_lag for lag, _ in holders):
            return 2
        return 1 if holders else 0

    return sorted(range(draft.partitions), key=lambda task: (giving_up(task), task))


def takeover_owner(task: int, desired: int, roster: Roster) -> int:
    """Who takes a task that nobody processes: never wait for a warmup when someone has state.

    The balanced owner if it is caught up; else any caught-up live member; else the most caught-up
    member when it is ahead of the balanced owner (KAFKA-13600: never stall, never restore from
    scratch when less will do). Balance is restored later by a warm handoff.
    """
    if roster.caught_up(desired, task):
        return desired
    lags = roster.lags_for(task)
    if not lags:
        return desired
    best_lag, best = lags[0]
    own = roster.lag(desired, task)
    return best if own is None or best_lag < own else desired


def _with_state(task: int, draft: Draft, roster: Roster, chooser: _LeastLoaded) -> int | None:
    """A member already warming the task (the plan in flight), else the most caught-up one with local
    state of it (a delta to replay, not a full restore), with room."""
    for member in draft.warmups[task]:
        if chooser.has_room(member):
            return member
    for _, member in roster.lags_for(task):
        if chooser.has_room(member):
            return member
    return None


class _LeastLoaded:
    """Members by load relative to capacity, with room left under their quota."""

    def __init__(
        self, load: dict[int, int], quota: Mapping[int, int] | None, capacity: Callable[[int], float]
    ):
        self._load = load
        self._quota = quota
        self._capacity = capacity
        self._heap = [(load[m] / capacity(m), m) for m in load]
        heapq.heapify(self._heap)

    def has_room(self, member: int) -> bool:
        return member in self._load and (self._quota is None or self._load[member] < self._quota[member])

    def least_loaded(self) -> int:
        while self._heap:
            ratio, member = self._heap[0]
            if ratio != self._load[member] / self._capacity(member) or not self.has_room(member):
                heapq.heappop(self._heap)
                continue
            return member
        raise AssertionError("quotas leave no room for a pending task")

    def take(self, member: int) -> None:
        self._load[member] += 1
        heapq.heappush(self._heap, (self._load[member] / self._capacity(member), member))
