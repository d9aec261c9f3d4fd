"""Handoffs warmed ahead: copies of the tasks of the member a rolling update hands off next.

A rolling update hands its members off one at a time, the next only once the app has settled
(`rollout.at_rest`). Begun then, each handoff waits for a full restore of the member's tasks on the
members that take them, so a rollout of large state costs one restore per member, one after another,
plus each member's restart (bench/scenarios/rolling-restart-large-state.yaml: balanced 600 s after it
began, 4 members whose tasks restore in 100 s). Yet the members that will take the next member's tasks
sit idle for part of that time: the member handing off now receives nothing, and while it restarts the
others have finished restoring its tasks. Copies of the next member's tasks warmed in those gaps
overlap its restores with the current member's restart, and its handoff is ready when its turn comes.

Where the copies go: to the members that will be there at its turn, every wanted member but it, each
as many as its balanced share will grow by once the member is gone — the one retiring now included, whose claim keeps the copy across its restart (the rollout marks a
member upcoming only when members keep their state on a claim). A copy already warming stays where it
is; otherwise a member with local state of the task goes first (the retiring member back from its
restart, its claim holding what it warmed), then the least loaded. Which tasks: those the member keeps
by the balanced placement, not those on their way back to a member returning from its restart. They
warm within the warmup budget after every other warmup (`handoff`): they are optional, and a handoff
or a restore under way goes first.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.quotas import quotas
from streamapp.rebalance.roster import Roster


def warm_ahead(
    draft: Draft, roster: Roster, desired: Sequence[int | None], damped: Collection[int] = ()
) -> dict[int, int]:
    """Each task of an upcoming member (`MemberView.upcoming`) that it keeps for now → the member to
    warm a copy on ahead of its handoff; a task is left out when no host has room for it. Members
    `damped` for flapping host nothing (they are on their way out)."""
    upcoming = {m for m in roster.live if roster.members[m].upcoming}
    if not upcoming:
        return {}
    hosts = [
        m
        for m in sorted(roster.members)
        if m < roster.replicas and roster.alive(m) and m not in upcoming and m not in damped
    ]
    tasks = [
        t
        for t in range(draft.partitions)
        if (o := draft.owner(t)) in upcoming
        and (desired[t] == o or (bool(draft.warmups[t]) and not roster.reported(desired[t] or o)))
    ]
    if not hosts or not tasks:
        return {}
    left = _room(draft, roster, upcoming, hosts)
    ahead: dict[int, int] = {}
    for task in tasks:
        kept = next((m for m in draft.warmups[task] if left.get(m, 0) > 0), None)
        if kept is not None:
            ahead[task] = kept
            left[kept] -= 1
    for task in tasks:
        if task in ahead:
            continue
        room = [m for m in hosts if left[m] > 0]
        if not room:
            break
        holders = sorted((lag, m) for m in room if (lag := roster.lag(m, task)) is not None)
        host = holders[0][1] if holders else min(room, key=lambda m: (-left[m], m))
        ahead[task] = host
        left[host] -= 1
    return ahead


def _room(draft: Draft, roster: Roster, upcoming: Collection[int], hosts: Sequence[int]) -> dict[int, int]:
    """How many of the upcoming members' tasks each host will own once they are gone: its balanced
    share without them less its share with them (the placement's own quotas, so the copies go where
    the handoff will put the tasks)."""
    owned: dict[int, int] = {}
    for task in range(draft.partitions):
        owner = draft.owner(task)
        if owner is not None:
            owned[owner] = owned.get(owner, 0) + 1
    wanted = range(roster.replicas)
    now = quotas(draft.partitions, wanted, roster.capacity, owned)
    later = quotas(draft.partitions, [m for m in wanted if m not in upcoming], roster.capacity, owned)
    return {m: max(0, later[m] - now[m]) for m in hosts}
