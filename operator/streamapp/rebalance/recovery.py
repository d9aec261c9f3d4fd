"""A lost member's tasks: wait for the member, or restore them elsewhere — whichever is quicker (pure).

A fixed delay (KIP-415's `scheduled.rebalance.max.delay.ms`) is right only when restoring a task costs
more than waiting for its member. With a second-long restore and a 40-s pod start, waiting costs forty
times the restore; with an hour-long restore and a bounce, restoring costs a hundred times the wait.
The engine is told both sides (`MemberView`): each task's restore size (`restore_rows`, from its
owner's reports), the measured restore throughput of the members that could take it, and the member's
expected return (`return_seconds`, set while its pod is visibly starting again: the shell's estimate
from the app's measured restarts and pod starts). It uses them under `lostTaskRecovery: auto`:

* A member's restores share its throughput, so a destination restores down tasks one after another,
  shortest first, behind what it restores already (`restorequeue`): each held task goes to the live
  member where its restore would end first, and is estimated to end at its place in that queue.
* A held task is restored elsewhere when its place in the queue ends before the member is back: the
  member is silent (its pod not visibly coming back: a node gone quiet, no room to schedule, an image
  that will not pull, a crash loop), or its return or the restore is not measured yet, or the restore
  ends first by the estimates. Restoring a task nobody processes is recovery, not an optional warmup,
  so the warmup budget (`maxWarmupReplicas`, which paces copies of tasks that *are* processed) never
  delays it; what paces it is what its destination can absorb: it starts once the restores ahead of it
  there are about done (`restorequeue.OVERLAP_SECONDS`), held meanwhile. A task whose place in the
  queue ends after the member is back waits for its member; it is warmed elsewhere only as insurance
  against a late member, at the end of its destination's queue and within the warmup budget, so
  survivors spend a bounded load on copies that may be thrown away, and none slows a restore that
  was chosen. Optional copies give way on a destination restoring down tasks (`budget`).
* Whichever is ready first takes the task: a warmup that caught up (`handoffLag`) while the owner is
  still away is promoted at once (`reservations.settle`), the owner becoming its standby in place;
  an owner back first keeps its tasks and the warmups are dropped. A restore under way is never
  dropped while its owner stays away (the estimates may have been wrong the other way).
* A restore is *taken over* — the task made active on its destination, which restores it while active —
  rather than warmed and promoted, once its member could not be back before the restore ends: at once
  when the restore is that quick, else as soon as the member, still away, could no longer make it
  (a pod not even starting is a whole pod start away). The task then processes the moment its restore
  ends, not at the warmup's next report and promotion; a member back first still finds a warmup.
* A member lost twice within `flapWindow` (`flapping`) is not trusted to return: its tasks are
  restored elsewhere as for a member whose pod is not coming back.
* A member that is not back `LATE_FACTOR` times its expected return after its loss is overdue: its
  estimate was wrong, and its tasks are restored elsewhere from then on.

So a lost task is down for about min(its member's return, its place in its destination's restore
queue at that member's throughput), plus detecting the loss and a batch. `scheduledRebalanceMaxDelay`
stays the upper bound of every reservation, and `lostTaskRecovery: delay` keeps the fixed delay
(`reservations.prewarm_due`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.model import EventKind, LostMember
from streamapp.rebalance.restorequeue import RestoreQueues, restore_rows
from streamapp.rebalance.roster import Roster

LATE_FACTOR = 1.5
"""A returning member still away this many times its expected return after its loss is overdue."""


@dataclass(frozen=True)
class Weighed:
    """One lost member's side of the scale: its held tasks, when it is expected back (None: unknown)
    and why, and each held task's estimated restore where it would go, in seconds from now to its end
    at its place in that member's queue (None: not measured); the rows of its held tasks and the
    throughput of the member its slowest would be restored on."""

    member: int
    lost_at: float
    held: tuple[int, ...]
    back_at: float | None
    why: str
    seconds: Mapping[int, float | None]
    rows: int | None
    rate: float | None


@dataclass(frozen=True)
class Recovery:
    """Who would take each held task (`targets`) and what to do now with it: take over at once,
    restoring while active (`takeover`), warm up elsewhere and promote when restored (`warm`), restore
    elsewhere once the restores ahead of them on their destination are about done (`queued`: held
    meanwhile), or — waiting for their member — warm elsewhere now as insurance against a late return
    (`insure`, within the warmup budget). `busy` are the destinations with restores of down tasks
    running or to come: no optional copy restores there meanwhile. What was weighed per lost member;
    when the answer changes with time alone."""

    targets: Mapping[int, int]
    takeover: frozenset[int]
    warm: frozenset[int]
    queued: frozenset[int]
    insure: frozenset[int]
    busy: frozenset[int]
    weighed: tuple[Weighed, ...]
    wake_at: float | None

    def report(self, draft: Draft) -> tuple[LostMember, ...]:
        """Per lost member, the figures and the choice as the plan leaves it: `restoring` are the held
        tasks taken over, warming or queued to be restored elsewhere (a task that waits may warm too,
        as insurance)."""
        chosen = self.warm | self.queued
        return tuple(
            _explain(
                w,
                tuple(t for t in w.held if draft.active[t] != w.member or t in chosen),
                sum(1 for t in w.held if t in self.queued),
                sum(
                    1 for t in w.held if draft.active[t] == w.member and t not in chosen and draft.warmups[t]
                ),
            )
            for w in self.weighed
        )


def recover(
    draft: Draft,
    roster: Roster,
    held: Collection[int],
    capacity: Callable[[int], float],
    delay: float,
    now: float,
    damped: Collection[int] = (),
) -> Recovery:
    """Choose where each held task would go and what happens to it now; the members `damped` for
    flapping (`flapping`) are not trusted to return.

    A destination's restore throughput is shared by the restores it runs, so they are queued there
    (`restorequeue`): what it restores already comes first (copies catching up, tasks it took over,
    restores of held tasks under way, never dropped while their owner stays away), then held tasks
    shortest first, each on the member where it would end first. A held task is restored elsewhere
    when its place in that queue ends before its member is back (see the module docstring), and
    starts once the restores ahead of it are about done. It is then taken over at once — restored by
    its new owner while active, with no warmup's report and promotion in between — when its restore
    is measured and ends before the member could possibly be back (its expected return, or for a
    silent member the app's usual return); otherwise it is warmed, so that a member back first still
    takes it back untouched. A task that waits for its member joins the end of its destination's
    queue as insurance, unless the operator itself restarts the member (`Draft.planned`)."""
    owners = {task: owner for task in sorted(held) if (owner := draft.active[task]) is not None}
    backs = {
        member: _expected_back(roster, member, draft.reservations[member] - delay, now, member in damped)
        for member in sorted(set(owners.values()))
    }
    fallback = _rates(roster)
    queues = RestoreQueues(draft, roster, owners, capacity, fallback, now)
    targets: dict[int, int] = {}
    finish: dict[int, float | None] = {}
    started: set[int] = set()
    chosen: set[int] = set()
    waiting: list[int] = []
    for task in _in_queue_order(draft, roster, owners):
        member = queues.place(task)
        if member is None:
            continue
        targets[task] = member
        end = finish[task] = queues.end(task, member)
        back = backs[owners[task]]
        if draft.warmups[task] or back.at is None or end is None or end < back.at:
            chosen.add(task)
            if draft.warmups[task] or end is None or end == now or queues.starts_now(member):
                started.add(task)
            queues.add(task, member)
        else:
            waiting.append(task)
    insure: set[int] = set()
    for task in waiting:
        if owners[task] not in draft.planned:
            if queues.starts_now(targets[task]):
                insure.add(task)
            queues.add(task, targets[task])
    takeover: set[int] = set()
    warm: set[int] = set()
    wakes: list[float] = []
    for task in sorted(chosen & started):
        back, done = backs[owners[task]], finish[task]
        quick = done is not None and back.earliest is not None and done <= back.earliest
        (takeover if quick else warm).add(task)
        if not quick and done is not None and back.at is None and back.earliest is not None:
            # A member not coming back (or not trusted to) cannot beat the restore once it could
            # not be back before it ends: then take over, so the task processes the moment its
            # restore ends instead of at the warmup's next report and promotion.
            wakes.append(done - (back.earliest - now))
    weighed: list[Weighed] = []
    for member, back in backs.items():
        tasks = tuple(t for t, owner in owners.items() if owner == member)
        lost_at = draft.reservations[member] - delay
        why = back.why if any(t in targets for t in tasks) else "no live member can take its tasks"
        if back.late_at is not None:
            wakes.append(back.late_at)
        rows = [r for t in tasks if (r := restore_rows(t, draft, roster)) is not None]
        total = sum(rows) if len(rows) == len(tasks) else None
        own = {t: None if (f := finish.get(t)) is None else f - now for t in tasks}
        slowest = max((t for t in tasks if own[t] is not None), key=lambda t: (own[t], t), default=None)
        rate = queues.rate(targets[slowest]) if slowest is not None else fallback
        weighed.append(Weighed(member, lost_at, tasks, back.at, why, own, total, rate))
    busy = frozenset(m for t, m in targets.items() if t in chosen or owners[t] not in draft.planned)
    return Recovery(
        targets,
        frozenset(takeover),
        frozenset(warm),
        frozenset(chosen - started),
        frozenset(insure),
        busy,
        tuple(weighed),
        min((w for w in wakes if w > now), default=None),
    )


def _in_queue_order(draft: Draft, roster: Roster, owners: Mapping[int, int]) -> list[int]:
    """Held tasks in the order they are queued: restores under way first, then shortest first (an
    unmeasured size last), then by task."""

    def key(task: int) -> tuple[bool, bool, int, int]:
        rows = restore_rows(task, draft, roster)
        return (not draft.warmups[task], rows is None, rows or 0, task)

    return sorted(owners, key=key)


def take_over(draft: Draft, tasks: Collection[int], targets: Mapping[int, int]) -> None:
    """Give each of `tasks` to the member that would take it, at once: it restores while active. The
    lost owner, still reserved, becomes the task's standby in place (as after a standby failover), so
    a member back with its local state takes the task back by a warm handoff, not a restore."""
    for task in sorted(tasks):
        owner = draft.active[task]
        draft.release(task)
        draft.assign(task, targets[task], EventKind.RESTORED_ELSEWHERE)
        if owner is not None and owner in draft.reservations:
            draft.standbys[task] = (*draft.standbys[task], owner)


@dataclass(frozen=True)
class Back:
    """When a lost member is expected to process again (`at`; None: unknown), the earliest it could
    (`earliest`: its expected return, or for a silent member the app's usual one; None: any moment),
    when it becomes overdue (`late_at`), and why, in words."""

    at: float | None
    earliest: float | None
    late_at: float | None
    why: str


def _expected_back(roster: Roster, member: int, lost_at: float, now: float, flapping: bool) -> Back:
    view = roster.members.get(member)
    expected = view.return_seconds if view is not None else None
    if not roster.returning(member) or flapping:
        # Its pod is not starting: it cannot be back before a whole pod start from now.
        start = lost_at if roster.returning(member) else now
        earliest = start + expected if expected is not None else None
        why = (
            "it is flapping (lost again soon after a return)"
            if flapping
            else "its pod is not visibly coming back"
        )
        return Back(None, earliest, None, why)
    if expected is None:
        return Back(None, None, None, "its return time is not measured yet")
    late_at = lost_at + LATE_FACTOR * expected
    if now >= late_at:
        return Back(None, None, late_at, f"it is overdue ({LATE_FACTOR:g}x its expected {expected:.0f} s)")
    back_at = lost_at + expected
    return Back(back_at, back_at, late_at, f"it is expected back {expected:.0f} s after its loss")


def _rates(roster: Roster) -> float | None:
    """The median restore rate the live members measured, else the one any member last reported: the
    rate of a member that has not measured its own yet. A restarted executor reports none until it has
    restored enough: in a large cluster run's rollout the one live member had just restarted, and
    every restore of the next member's tasks was "not measured", so restored elsewhere whatever it
    cost. The lost member's last report speaks for the same app on the same network."""
    for members in (roster.live, sorted(roster.members)):
        known = [v.restore_rate for m in members if (v := roster.members[m]).restore_rate]
        if known:
            return statistics.median(known)
    return None


def _explain(weighed: Weighed, restoring: tuple[int, ...], queued: int, insured: int) -> LostMember:
    """The figures behind one member's choice, and a phrase a person can check them by."""
    known = [s for s in weighed.seconds.values() if s is not None]
    slowest = max(known) if known and len(known) == len(weighed.held) else None
    restore = "not measured" if slowest is None else f"~{slowest:.0f} s"
    held = len(weighed.held)
    behind = f", {queued} queued behind restores on the members taking them" if queued else ""
    if len(restoring) == held:
        reason = f"restoring elsewhere: {weighed.why}; the last restore ends in {restore}{behind}"
    elif not restoring:
        reason = f"waiting for the member: {weighed.why}; a restore elsewhere would end in {restore}"
        if insured:
            reason += f"; {insured} warming elsewhere in case it is late"
    else:
        reason = (
            f"restoring {len(restoring)} of {held} tasks elsewhere{behind}: {weighed.why}; "
            f"restored elsewhere, the last would end in {restore}"
        )
    return LostMember(
        weighed.member,
        weighed.lost_at,
        weighed.held,
        restoring,
        weighed.back_at,
        slowest,
        weighed.rows,
        weighed.rate,
        reason,
    )
