"""The rebalance engine: one pure function from what is observed to what every member should do.

`plan(app, members, previous, now)` is all the operator, the simulator and the tests call. It reads no
clock and does no I/O: time is an argument and the intent of an in-flight handoff travels in
`previous`, so the same inputs always give the same plan and a restarted operator resumes exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from streamapp.rebalance import flapping
from streamapp.rebalance.config import AppConfig
from streamapp.rebalance.deadlines import timed_out_members
from streamapp.rebalance.draft import Draft
from streamapp.rebalance.eager import plan_eager
from streamapp.rebalance.fencing import refence_owners, still_fenced
from streamapp.rebalance.handoff import revoke_moves, warm_handoffs
from streamapp.rebalance.model import Assignment, Event, EventKind, Flap, LostMember, MemberView, Plan
from streamapp.rebalance.placement import desired_owners, takeover_owner
from streamapp.rebalance.quotas import quotas
from streamapp.rebalance.recovery import Recovery, recover, take_over
from streamapp.rebalance.reservations import (
    HoldRules,
    expected_back,
    held_tasks,
    prewarm_at,
    prewarm_due,
    settle,
)
from streamapp.rebalance.roster import Roster
from streamapp.rebalance.standbys import place_standbys
from streamapp.rebalance.upcoming import warm_ahead


def plan(app: AppConfig, members: Iterable[MemberView], previous: Assignment, now: float) -> Plan:
    """Compute the next assignment of `app` from the members as observed at time `now`."""
    config = app.rebalance
    views = list(members)
    flaps_before = previous.flaps
    damped: frozenset[int] = frozenset()
    if config.state_aware and config.flap_window > 0:
        flaps = flapping.age(previous.flaps, views, app.replicas, config.flap_window, now)
        damped = flapping.damped(flaps, views, app.replicas)
        views = flapping.distrust(views, damped)
        previous = replace(previous, flaps=flaps)
    elif previous.flaps:
        previous = replace(previous, flaps=())
    roster = Roster.build(views, app.replicas, config.acceptable_recovery_lag)
    draft = Draft(previous, app.partitions, now, roster.store_epochs(app.partitions))
    recovery = None
    if config.protocol == "eager":
        plan_eager(draft, roster, now)
    else:
        recovery = _plan_incremental(draft, roster, app, now, damped)
    refenced = refence_owners(draft)
    timed_out = timed_out_members(draft, roster, config.revocation_timeout, now)
    return _finish(draft, roster, app, now, timed_out, refenced, recovery, flaps_before)


def _plan_incremental(
    draft: Draft, roster: Roster, app: AppConfig, now: float, damped: frozenset[int]
) -> Recovery | None:
    """Cooperative and streamapp: move only what must move, hold tasks of lost members (and, with
    `lostTaskRecovery: auto`, restore them elsewhere where that is quicker: `recovery`); members
    `damped` for flapping (`flapping`) are not waited for."""
    config = app.rebalance
    aware = config.state_aware
    auto = aware and config.lost_task_recovery == "auto"
    rules = HoldRules(
        config.scheduled_rebalance_max_delay,
        aware and config.failover_to_standby,
        promote_warmups=auto,
        handoff_lag=config.handoff_lag,
    )
    reserved = set(draft.reservations)
    settle(draft, roster, rules, now)
    if aware and config.flap_window > 0:
        lost = set(draft.reservations) - reserved - draft.planned
        draft.flaps = flapping.lose(draft.flaps, lost, now)
        damped |= flapping.damped(draft.flaps, roster.members.values(), app.replicas)
    _drop_copies_off_live_members(draft, roster, keep_standbys=aware, damped=damped)
    for member in roster.draining:
        # A member retiring for a rolling update always hands off first; scale-in only if asked to.
        if not (aware and roster.live and (config.drain_on_scale_in or member < app.replicas)):
            for task in draft.owned_by(member):
                draft.revoke(task)

    def capacity(member: int) -> float:
        return roster.capacity(member) if aware else 1.0

    held = held_tasks(draft)
    delay = config.scheduled_rebalance_max_delay
    recovery = None
    restores: dict[int, int] = {}
    busy: frozenset[int] = frozenset()
    if auto:
        recovery = recover(draft, roster, held, capacity, delay, now, damped)
        targets = recovery.targets
        take_over(draft, recovery.takeover, targets)
        held -= recovery.takeover
        restores = {task: targets[task] for task in sorted(recovery.warm)}
        # The tasks that wait for their member are down too: insured, within the warmup budget, against
        # a member later than expected (a copy thrown away if it is back first), at the end of their
        # destination's queue (`recovery`).
        insured = {task: targets[task] for task in sorted(recovery.insure)}
        busy = recovery.busy
    else:
        prewarm = prewarm_due(draft, roster, held, delay, now, damped) if aware else set()
        insured = _would_take(draft, roster, prewarm, capacity)
    owned = {m: 0 for m in roster.live}
    for task in range(draft.partitions):
        owner = draft.owner(task)
        if owner in owned:
            owned[owner] += 1
    quota = None if draft.reservations else quotas(draft.partitions, roster.live, capacity, owned)
    desired = desired_owners(draft, roster, quota, held, aware, capacity)
    for task, target in enumerate(desired):
        if target is not None and draft.active[task] is None:
            draft.assign(task, takeover_owner(task, target, roster) if aware else target)
    if aware:
        probe_due = draft.next_probe_at is not None and now >= draft.next_probe_at
        ahead = warm_ahead(draft, roster, desired, damped)
        warm_handoffs(
            draft, roster, desired, config, probe_due, restores, insured, ahead, busy, held_first=auto
        )
        back = expected_back(draft, roster, delay, now) - damped
        place_standbys(draft, roster, desired, config.standby_replicas, capacity, back)
        _schedule_probe(draft, now, config.probing_rebalance_interval, probe_due)
    else:
        revoke_moves(draft, desired)
    draft.membership = roster.live
    return recovery


def _would_take(
    draft: Draft, roster: Roster, held: set[int], capacity: Callable[[int], float]
) -> dict[int, int]:
    """Who would take each held task if its reservation expired now (nothing else moves)."""
    if not held:
        return {}
    placed = desired_owners(draft, roster, None, (), True, capacity)
    return {task: member for task in sorted(held) if (member := placed[task]) is not None}


def _drop_copies_off_live_members(
    draft: Draft, roster: Roster, keep_standbys: bool, damped: frozenset[int]
) -> None:
    """Warmups need a live member — or, warming ahead for a member a rolling update hands off next, one
    that is alive (`upcoming`); standbys survive only on members reserved after a loss."""
    for task in range(draft.partitions):
        owner = draft.active[task]
        ahead = owner is not None and roster.is_upcoming(owner)
        draft.warmups[task] = tuple(
            m
            for m in draft.warmups[task]
            if roster.is_live(m) or (ahead and m < roster.replicas and roster.alive(m) and m not in damped)
        )
        draft.standbys[task] = tuple(
            m
            for m in draft.standbys[task]
            if keep_standbys and (roster.is_live(m) or m in draft.reservations)
        )


def _schedule_probe(draft: Draft, now: float, interval: float, probe_due: bool) -> None:
    """Re-check warmups every probing interval while any are running (a fallback to reports)."""
    if not any(draft.warmups):
        draft.next_probe_at = None
    elif draft.next_probe_at is None or probe_due:
        draft.next_probe_at = now + interval


def _finish(
    draft: Draft,
    roster: Roster,
    app: AppConfig,
    now: float,
    timed_out: tuple[int, ...],
    refenced: tuple[int, ...],
    recovery: Recovery | None,
    flaps_before: tuple[Flap, ...],
) -> Plan:
    previous = draft.previous
    lost: tuple[LostMember, ...] = recovery.report(draft) if recovery is not None else ()
    window = app.rebalance.flap_window
    for event in flapping.events(flaps_before, draft.flaps, window, app.replicas):
        draft.event(event)
    assignment, changed = draft.freeze()
    if previous.in_flight() and not assignment.in_flight() and not _homeless(assignment, roster):
        draft.event(Event(EventKind.REBALANCE_COMPLETED, detail=f"generation {assignment.generation}"))
    events = draft.all_events()
    owners = {t.active for t in assignment.tasks}
    removable = tuple(sorted(m for m in roster.members if m >= app.replicas and m not in owners))
    deadlines = [r.deadline for r in assignment.reservations]
    if app.rebalance.state_aware:
        delay = app.rebalance.scheduled_rebalance_max_delay
        deadlines += [prewarm_at(r.deadline, delay) for r in assignment.reservations]
    if recovery is not None and recovery.wake_at is not None:
        deadlines.append(recovery.wake_at)
    if assignment.next_probe_at is not None:
        deadlines.append(assignment.next_probe_at)
    deadlines += flapping.steady_at(assignment.flaps, window).values()
    timeout = app.rebalance.revocation_timeout
    deadlines += [t.revoking_at + timeout for t in assignment.tasks if t.revoking_at is not None]
    wake_at = min((d for d in deadlines if d > now), default=None)
    reason = "; ".join(e.describe() for e in events) if events else "no change"
    fenced = tuple(sorted({*refenced, *still_fenced(assignment, roster)}))
    return Plan(assignment, changed, wake_at, events, removable, reason, timed_out, fenced, lost)


def _homeless(assignment: Assignment, roster: Roster) -> bool:
    """Tasks nobody owns although a live member could take them."""
    return bool(roster.live) and any(t.active is None for t in assignment.tasks)
