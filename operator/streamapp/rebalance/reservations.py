"""Who still owns what: acknowledged revocations, lost members, and delayed reassignment.

This is the part of a planning step that reacts to the world rather than to balance. A revocation
ends when the owner acknowledges it or its pod is gone. A member whose pod is gone keeps its tasks
reserved until `scheduledRebalanceMaxDelay` passes (KIP-415), because it usually comes back with its
state; a caught-up standby may take over at once instead (`failoverToStandby`). The deadline is
persisted with the assignment, so a restarted operator neither forgets nor extends it.

Under `lostTaskRecovery: auto` the engine weighs waiting against restoring each held task elsewhere
(`recovery`), and a warmup restored for a held task takes it over as soon as it has caught up
(`HoldRules.promote_warmups`). Under `delay`, held tasks are pre-warmed on whoever would take them, but
only once half the delay has passed (`PREWARM_AFTER`): most losses are bounces that return well within
the delay, and a warmup started at the loss is thrown away at the return (two per bounce with the
default budget). The second half of the delay still lets a member that never returns hand its tasks to
warm copies at the deadline. The same point holds, in both modes, for the lost member's standby copies:
they are replaced on live members only from then on.

Under `delay`, a member whose pod is visibly starting again (`returning`: its container restarting in
place, a replacement pod scheduled) is not pre-warmed for at all: it is on its way back, and a restart slower
than half the delay — a Spark executor on a loaded node takes a minute or more — would otherwise
always waste the copies. Should it stop returning (a crash loop, an image that will not pull), the
pre-warm point applies again; should it still be starting at the deadline, its tasks move cold, so the
delay is to be set above a restart's time.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.model import Event, EventKind
from streamapp.rebalance.roster import Roster


@dataclass(frozen=True)
class HoldRules:
    """What a protocol does with a lost member's tasks: hold them for `delay`; hand one to a caught-up
    standby at once (`failover_to_standby`); hand one to a warmup restored for it elsewhere as soon as
    that has applied all but `handoff_lag` records (`promote_warmups`: `lostTaskRecovery: auto`)."""

    delay: float
    failover_to_standby: bool
    promote_warmups: bool = False
    handoff_lag: int = 0


def settle(draft: Draft, roster: Roster, rules: HoldRules, now: float) -> None:
    """Bring ownership up to date with what the members acknowledged and which pods exist."""
    _release_acknowledged(draft, roster)
    _welcome_back(draft, roster)
    _handle_gone_owners(draft, roster, rules, now)
    _expire(draft, roster, rules.delay, now)


PREWARM_AFTER = 0.5


def prewarm_at(deadline: float, delay: float) -> float:
    """When pre-warming a reservation's tasks starts: `PREWARM_AFTER` of the delay before `deadline`."""
    return deadline - delay * (1.0 - PREWARM_AFTER)


def expected_back(draft: Draft, roster: Roster, delay: float, now: float) -> set[int]:
    """Reserved members still likely to return (before their pre-warm point, or visibly starting
    again): their copies are not replaced."""
    return {
        m
        for m, deadline in draft.reservations.items()
        if now < prewarm_at(deadline, delay) or roster.returning(m)
    }


def prewarm_due(
    draft: Draft, roster: Roster, held: set[int], delay: float, now: float, damped: Collection[int] = ()
) -> set[int]:
    """The held tasks whose owner has been away long enough for pre-warming them to be worth it, and
    is not visibly on its way back — or is flapping (`damped`: its return is not trusted)."""
    back = expected_back(draft, roster, delay, now) - set(damped)
    return {task for task in held if draft.active[task] not in back}


def held_tasks(draft: Draft) -> set[int]:
    """Tasks whose owner is lost but still within its reservation."""
    return {t for t, owner in enumerate(draft.active) if owner is not None and owner in draft.reservations}


def _release_acknowledged(draft: Draft, roster: Roster) -> None:
    """A revocation ends when the owner acknowledged it or its pod is gone — not merely being deleted
    (a revocation that timed out has its pod deleted, and the process may go on until its grace period
    ends: `deadlines`)."""
    for task, since in enumerate(draft.revoking):
        owner = draft.active[task]
        if since is None or owner is None:
            continue
        if roster.acked(owner) >= since or roster.gone(owner):
            draft.release(task)


def _welcome_back(draft: Draft, roster: Roster) -> None:
    for member in sorted(draft.reservations):
        if roster.alive(member):
            del draft.reservations[member]
            draft.event(Event(EventKind.MEMBER_RETURNED, member, tuple(draft.owned_by(member))))


def _handle_gone_owners(draft: Draft, roster: Roster, rules: HoldRules, now: float) -> None:
    """Fail tasks over to caught-up standbys or restored warmups, hold the rest for their owner, release
    what cannot wait.

    A member that may come back is reserved even when every one of its tasks failed over: balance
    then waits for it (nothing moves among the survivors for a bounce) and it keeps its copies, each
    failed-over task's included — its old owner becomes its standby in place, so the member returns
    to state it can take back by a handoff without a restore. Such a reservation, holding no task,
    ends at the pre-warm point (`_expire`).
    """
    lost: set[int] = set()
    for task, owner in enumerate(draft.active):
        if owner is None or roster.alive(owner):
            continue
        if draft.revoking[task] is not None and not roster.gone(owner):
            continue  # revoked, and its pod is still being deleted: released once it is gone
        holds = rules.delay > 0 and owner < roster.replicas
        copy, kind = _ready_copy(task, draft, roster, rules)
        if copy is not None:
            draft.release(task)
            draft.assign(task, copy, kind)
            if holds:
                draft.standbys[task] = (*draft.standbys[task], owner)
        elif not holds:
            draft.release(task)
            draft.note(EventKind.MEMBER_LOST, owner, task, "released at once")
        if holds:
            lost.add(owner)
    for owner in sorted(lost - set(draft.reservations)):
        draft.reservations[owner] = now + rules.delay
        view = roster.members.get(owner)
        if view is not None and view.replaced:
            draft.planned.add(owner)
        else:
            draft.planned.discard(owner)
        draft.event(
            Event(
                EventKind.MEMBER_LOST, owner, tuple(draft.owned_by(owner)), f"reserved for {rules.delay:g}s"
            )
        )


def _expire(draft: Draft, roster: Roster, delay: float, now: float) -> None:
    """End reservations at their deadline; one that holds no task (all failed over) ends at its
    pre-warm point, when the member's copies are replaced anyway, so balance need not wait longer —
    unless the member is returning, when its copies are kept for it until the deadline."""
    for member, deadline in sorted(draft.reservations.items()):
        owned = draft.owned_by(member)
        keep = owned or roster.returning(member)
        until = deadline if keep else min(deadline, prewarm_at(deadline, delay))
        if now < until and member < roster.replicas:
            continue
        del draft.reservations[member]
        for task in owned:
            draft.release(task)
        if owned:
            draft.event(Event(EventKind.RESERVATION_EXPIRED, member, tuple(owned)))


def _ready_copy(task: int, draft: Draft, roster: Roster, rules: HoldRules) -> tuple[int | None, EventKind]:
    """The live copy that may take over a lost owner's task now: a caught-up standby, else (with
    `promote_warmups`) a warmup restored for it that has applied all but `handoff_lag` records — the
    race between the member's return and a restore elsewhere, won by the restore."""
    if rules.failover_to_standby:
        standbys = sorted(
            (roster.lag(m, task) or 0, m)
            for m in draft.standbys[task]
            if roster.is_live(m) and roster.caught_up(m, task)
        )
        if standbys:
            return standbys[0][1], EventKind.FAILED_OVER
    if rules.promote_warmups:
        warmups = sorted(
            (lag, m)
            for m in draft.warmups[task]
            if roster.is_live(m) and (lag := roster.lag(m, task)) is not None and lag <= rules.handoff_lag
        )
        if warmups:
            return warmups[0][1], EventKind.RESTORED_ELSEWHERE
    return None, EventKind.FAILED_OVER
