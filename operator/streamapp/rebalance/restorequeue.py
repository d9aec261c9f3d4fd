"""The restores a member runs share its restore throughput: one queue per destination (pure).

A member restores at its measured throughput (`MemberView.restore_rate`: rows a second, all its
restores together). In a cluster a cold restore is bounded by the member's network to the store, or by
the CPU that applies rows under Python's GIL — not per restore — so restores running side by side on
one member share it: two at once take about twice as long each as one alone. Measured on real
executors (a task's snapshot of 29 MB, the store behind a shaped link): a bounced member's two tasks,
restored at once on the one survivor, each took twice the estimate of a restore alone, and the member
was back before either ended.

So the engine queues the restores of down tasks on their destination, behind what it restores already,
and estimates each task's end at its place in the queue. Under a fixed shared throughput `R`, restoring
tasks of sizes s1 ≤ … ≤ sn one after another ends task k at (s1 + … + sk) / R; starting them all at once
ends it at (s1 + … + s(k-1) + (n − k + 1)·sk) / R, never sooner, and the last at the same (s1 + … + sn) / R:
shortest first, one at a time, is never worse for the total downtime nor for the worst task, and better
for every task but the last. Where throughput grows with concurrency (a restore bounded by its own round
trips to the store, not by the member's link) several at once would be faster; but no measured figure
says by how much, the executor's throughput is measured over whatever ran, and the queue overlaps the
next restore with the end of the one ahead (`OVERLAP_SECONDS`), which lets short restores run together.

Where a task goes: shortest first, each to the live member where its restore would end first (list
scheduling, which minimizes the summed ends over members of equal throughput) — a member warming it
keeps it, a member with local state of it restores only its lag — and, between members where it would
end at the same time (empty queues), to the least loaded, so that a member's loss spreads its tasks as
balance wants. A survivor that restores a task by then is loaded beyond its share moves it on later by a
warm handoff, with no downtime.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.roster import Roster

OVERLAP_SECONDS = 5.0
"""A destination starts the next restore of its queue once those ahead of it are expected to end
within this many seconds: about the time between a restore ending and the next one starting without it
(the executor's report of the copy caught up, a reconcile, the target applied), so that a destination
does not idle between restores. Under a shared throughput the overlap delays the restore ahead by at
most as much and ends no restore of the queue later; restores of a few seconds each start together."""


@dataclass
class _Destination:
    """One live member: its restore throughput (`rate`; None: not measured anywhere), the rows queued on
    it (`ahead`), and its load — active tasks over capacity — to break ties with."""

    rate: float | None
    ahead: float
    load: float
    capacity: float


class RestoreQueues:
    """The live members' restore queues, filled as tasks are placed on them, at time `now`; `held` are
    the tasks being placed (what a member restores for the others is already queued)."""

    def __init__(
        self,
        draft: Draft,
        roster: Roster,
        held: Collection[int],
        capacity: Callable[[int], float],
        fallback: float | None,
        now: float,
    ) -> None:
        self._draft = draft
        self._roster = roster
        self._now = now
        owned = dict.fromkeys(roster.live, 0)
        for task in range(draft.partitions):
            owner = draft.owner(task)
            if owner in owned:
                owned[owner] += 1
        self._members: dict[int, _Destination] = {}
        for member in roster.live:
            view = roster.members[member]
            self._members[member] = _Destination(
                view.restore_rate or fallback,
                _restoring(member, draft, roster, frozenset(held)),
                owned[member] / capacity(member),
                capacity(member),
            )

    def rate(self, member: int) -> float | None:
        """The member's restore throughput the estimates use."""
        return self._members[member].rate

    def rows(self, task: int, member: int) -> int | None:
        """Rows `member` restores to take `task` from what it holds: 0 with a caught-up copy there, its
        copy's lag with one under way (a warmup half done has half left) unless a restore from nothing
        is shorter, all of them without; None when neither is known."""
        if self._roster.caught_up(member, task):
            return 0
        known = [
            n
            for n in (self._roster.lag(member, task), restore_rows(task, self._draft, self._roster))
            if n is not None
        ]
        return min(known) if known else None

    def end(self, task: int, member: int) -> float | None:
        """When `task`'s restore would end on `member`, queued behind what it restores already (None:
        its size or the member's throughput is not measured); now when the member is caught up."""
        rows = self.rows(task, member)
        rate = self._members[member].rate
        if rows == 0:
            return self._now
        if rows is None or rate is None:
            return None
        return self._now + (self._members[member].ahead + rows) / rate

    def place(self, task: int) -> int | None:
        """The member that would take `task`: one already warming it, else the one where its restore
        would end first (an unmeasured end last), the least loaded between equal ends; None when no
        member is live. The task counts in that member's load from then on (not in its queue: `add`)."""
        warming = [m for m in self._draft.warmups[task] if m in self._members]

        def key(member: int) -> tuple[bool, float, float, int]:
            end = self.end(task, member)
            return (end is None, end or 0.0, self._members[member].load, member)

        member = warming[0] if warming else min(self._members, key=key, default=None)
        if member is not None:
            self._members[member].load += 1 / self._members[member].capacity
        return member

    def starts_now(self, member: int) -> bool:
        """Whether a restore queued next on `member` starts now: what is ahead of it there ends within
        `OVERLAP_SECONDS` (always when the throughput is not measured: nothing to pace by)."""
        destination = self._members[member]
        return destination.rate is None or destination.ahead <= destination.rate * OVERLAP_SECONDS

    def add(self, task: int, member: int) -> None:
        """Queue `task`'s restore on `member`: what follows it waits for it too."""
        self._members[member].ahead += self.rows(task, member) or 0


def restore_rows(task: int, draft: Draft, roster: Roster) -> int | None:
    """Rows a cold copy of `task` restores: its owner's last report, else the largest any member made."""
    owner = draft.active[task]
    view = roster.members.get(owner) if owner is not None else None
    if view is not None and task in view.restore_rows:
        return view.restore_rows[task]
    found = [v.restore_rows[task] for v in roster.members.values() if task in v.restore_rows]
    return max(found) if found else None


def _restoring(member: int, draft: Draft, roster: Roster, held: frozenset[int]) -> float:
    """Rows `member` restores already for tasks that are not held: tasks it owns or keeps a standby of,
    by their reported lag — a task it took over restores while active, and a copy it has not reported
    on yet (taken over a moment ago, or held by a pod that has not reported since it started) counts
    as a restore in full until it has. Warmups of tasks that are processed elsewhere are not counted:
    optional, they give way to the restores of down tasks (`budget`)."""
    total = 0.0
    for task in range(draft.partitions):
        if task in held or (draft.active[task] != member and member not in draft.standbys[task]):
            continue
        lag = roster.lag(member, task)
        total += lag if lag is not None else (restore_rows(task, draft, roster) or 0)
    return total
