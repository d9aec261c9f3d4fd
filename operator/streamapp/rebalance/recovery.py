"""A lost member's tasks: wait for the member, or restore them elsewhere — whichever is quicker (pure).

A fixed delay (KIP-415's `scheduled.rebalance.max.delay.ms`) is right only when restoring a task costs
more than waiting for its member. With a second-long restore and a 40-s pod start, waiting costs forty
times the restore; with an hour-long restore and a bounce, restoring costs a hundred times the wait.
The engine is told both sides (`MemberView`): each task's restore size (`restore_rows`, from its
owner's reports) over the measured restore rate of the member that would take it, and the member's
expected return (`return_seconds`, set while its pod is visibly starting again: the shell's estimate
from the app's measured restarts and pod starts). It uses them under `lostTaskRecovery: auto`:

* A held task is restored elsewhere at once — a warmup on the member that would take it — when the
  restore is expected to finish before the member is back: the member is silent (its pod not visibly
  coming back: a node gone quiet, no room to schedule, an image that will not pull, a crash loop), or
  its return or the restore is not measured yet, or the restore finishes first by the estimates.
* A task that is down is restored at once, all of a lost member's tasks together, spread over the
  members that would take them: restoring a task nobody processes is recovery, not an optional warmup,
  so the warmup budget (`maxWarmupReplicas`, which paces copies of tasks that *are* processed) never
  delays it. Each restore is estimated at the destination's measured rate for one restore
  (`MemberView.restore_rate`, measured as its restores ran, side by side or not), which is how fast the
  eager protocol's blocking restores would run there too. A task whose restore is expected to lose
  the race waits for its member; it is warmed elsewhere only as insurance against a late member,
  within the warmup budget (`engine`), so survivors spend a bounded load on copies that may be thrown
  away.
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

So a lost task is down for about min(its member's return, a restore elsewhere), plus detecting the
loss and a batch. `scheduledRebalanceMaxDelay` stays the upper bound of every reservation, and
`lostTaskRecovery: delay` keeps the fixed delay (`reservations.prewarm_due`).
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.model import EventKind, LostMember
from streamapp.rebalance.roster import Roster

LATE_FACTOR = 1.5
"""A returning member still away this many times its expected return after its loss is overdue."""


@dataclass(frozen=True)
class Weighed:
    """One lost member's side of the scale: its held tasks, when it is expected back (None: unknown)
    and why, and each held task's estimated restore where it would go (None: not measured)."""

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
    """What to do now with held tasks: take over at once, restoring while active (`takeover`), or warm
    up elsewhere and promote when restored (`warm`); what was weighed per lost member; when the answer
    changes with time alone (a member becoming overdue)."""

    takeover: frozenset[int]
    warm: frozenset[int]
    weighed: tuple[Weighed, ...]
    wake_at: float | None

    def report(self, draft: Draft) -> tuple[LostMember, ...]:
        """Per lost member, the figures and the choice as the plan leaves it: `restoring` are the held
        tasks taken over or chosen to warm elsewhere (a task that waits may warm too, as insurance)."""
        return tuple(
            _explain(
                w,
                tuple(t for t in w.held if draft.active[t] != w.member or t in self.warm),
                sum(
                    1
                    for t in w.held
                    if draft.active[t] == w.member and t not in self.warm and draft.warmups[t]
                ),
            )
            for w in self.weighed
        )


def recover(
    draft: Draft,
    roster: Roster,
    held: Collection[int],
    targets: Mapping[int, int],
    delay: float,
    now: float,
    damped: Collection[int] = (),
) -> Recovery:
    """Choose what happens to each held task now; `targets` says who would take it; the members
    `damped` for flapping (`flapping`) are not trusted to return.

    A task is restored elsewhere when that is expected to finish before its member is back (see the
    module docstring). It is then taken over at once — restored by its new owner while active, with no
    warmup's report and promotion in between — when its restore is measured and finishes before the
    member could possibly be back (its expected return, or for a silent member the app's usual
    return); otherwise it is warmed, so that a member back first still takes it back untouched."""
    by_member: dict[int, list[int]] = {}
    for task in sorted(held):
        owner = draft.active[task]
        if owner is not None:
            by_member.setdefault(owner, []).append(task)
    rate = _rates(roster)
    seconds = {task: _restore_seconds(task, member, draft, roster, rate) for task, member in targets.items()}
    finish = {task: now + estimate for task, estimate in seconds.items() if estimate is not None}
    takeover: set[int] = set()
    warm: set[int] = set()
    weighed: list[Weighed] = []
    wakes: list[float] = []
    for member, tasks in sorted(by_member.items()):
        lost_at = draft.reservations[member] - delay
        back = _expected_back(roster, member, lost_at, now, member in damped)
        why = back.why if any(t in targets for t in tasks) else "no live member can take its tasks"
        if back.late_at is not None:
            wakes.append(back.late_at)
        for task in tasks:
            done = finish.get(task)
            if task not in targets or not (
                draft.warmups[task] or back.at is None or done is None or done < back.at
            ):
                continue
            quick = done is not None and back.earliest is not None and done <= back.earliest
            (takeover if quick else warm).add(task)
            if not quick and done is not None and back.at is None and back.earliest is not None:
                # A member not coming back (or not trusted to) cannot beat the restore once it could
                # not be back before it ends: then take over, so the task processes the moment its
                # restore ends instead of at the warmup's next report and promotion.
                wakes.append(done - (back.earliest - now))
        rows = [r for t in tasks if (r := restore_rows(t, draft, roster)) is not None]
        total = sum(rows) if len(rows) == len(tasks) else None
        own = {t: seconds.get(t) for t in tasks}
        weighed.append(Weighed(member, lost_at, tuple(tasks), back.at, why, own, total, rate))
    wake_at = min((w for w in wakes if w > now), default=None)
    return Recovery(frozenset(takeover), frozenset(warm), tuple(weighed), wake_at)


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
    """The median restore rate the live members measured: the rate of a member that has not measured
    its own yet."""
    known = [v.restore_rate for m in roster.live if (v := roster.members[m]).restore_rate]
    return statistics.median(known) if known else None


def restore_rows(task: int, draft: Draft, roster: Roster) -> int | None:
    """Rows a cold copy of `task` restores: its owner's last report, else the largest any member made."""
    owner = draft.active[task]
    view = roster.members.get(owner) if owner is not None else None
    if view is not None and task in view.restore_rows:
        return view.restore_rows[task]
    found = [v.restore_rows[task] for v in roster.members.values() if task in v.restore_rows]
    return max(found) if found else None


def _restore_seconds(
    task: int, member: int, draft: Draft, roster: Roster, fallback: float | None
) -> float | None:
    """How long `member` takes to restore `task` from what it holds: 0 with a caught-up copy there,
    its copy's lag with one under way (a warmup half done has half left) unless a restore from
    nothing is shorter, all the rows without."""
    if roster.caught_up(member, task):
        return 0.0
    known = [n for n in (roster.lag(member, task), restore_rows(task, draft, roster)) if n is not None]
    rows = min(known) if known else None
    view = roster.members.get(member)
    rate = (view.restore_rate if view is not None else None) or fallback
    return None if rows is None or not rate else rows / rate


def _explain(weighed: Weighed, restoring: tuple[int, ...], insured: int) -> LostMember:
    """The figures behind one member's choice, and a phrase a person can check them by."""
    known = [s for s in weighed.seconds.values() if s is not None]
    slowest = max(known) if known and len(known) == len(weighed.held) else None
    restore = "not measured" if slowest is None else f"~{slowest:.0f} s"
    held = len(weighed.held)
    if len(restoring) == held:
        reason = f"restoring elsewhere: {weighed.why}; a restore takes {restore}"
    elif not restoring:
        reason = f"waiting for the member: {weighed.why}; a restore would take {restore}"
        if insured:
            reason += f"; {insured} warming elsewhere in case it is late"
    else:
        reason = f"restoring {len(restoring)} of {held} tasks elsewhere: {weighed.why}; the longest restore {restore}"
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
