"""Moving a task from its live owner to its balanced owner (Kafka Streams' TaskMovement).

The cooperative baseline revokes at once and lets the new owner restore while nobody processes. The
state-aware protocol never takes a task from a live, processing owner for a cold one: the destination
first warms the task in the background (at most `maxWarmupReplicas` at once per destination member,
and `maxWarmupReplicasTotal` in all when set; a standby counts as warm), and the owner is revoked only when the destination reports a lag of at most `handoffLag` — or, at the
probing re-check, at most `acceptableRecoveryLag` — so the only pause is the owner's final batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from streamapp.rebalance.budget import WarmupBudget
from streamapp.rebalance.config import RebalanceConfig
from streamapp.rebalance.draft import Draft
from streamapp.rebalance.model import EventKind
from streamapp.rebalance.roster import Roster


def revoke_moves(draft: Draft, desired: Sequence[int | None]) -> None:
    """Cooperative: revoke every task whose balanced owner is another member."""
    for task in _moving(draft, desired):
        draft.revoke(task)


def warm_handoffs(
    draft: Draft,
    roster: Roster,
    desired: Sequence[int | None],
    config: RebalanceConfig,
    probe_due: bool,
    restores: Mapping[int, int],
    insured: Mapping[int, int],
    ahead: Mapping[int, int],
    busy: frozenset[int] = frozenset(),
    held_first: bool = False,
) -> None:
    """State-aware: hand over caught-up tasks, warm up the others within the warmup budget.

    Tasks held for a lost member are warmed on the member that would take them: if the member returns
    the warmup is dropped; if not, the warmup takes the task once it is restored. `restores` are
    restored in place of their member, the engine having found that quicker than waiting
    (`recovery`): nobody processes them, so they start at once, outside the budget. `insured` are
    warmed within the budget, as insurance against a member later than expected; with `held_first`
    (`lostTaskRecovery: auto`: the tasks are down) before every other warmup, otherwise (pre-warming
    under `delay`) after them. `ahead` are tasks of a member a rolling update hands off next, warmed
    ahead where they will go (`upcoming`), after every other warmup. `busy` members restore down
    tasks (`recovery`): no optional copy starts or stays there meanwhile.
    """
    held = {**insured, **restores}
    wanted = [held.get(task, ahead.get(task, target)) for task, target in enumerate(desired)]
    _cancel_unwanted_warmups(draft, wanted)
    waiting: list[int] = []
    for task in _moving(draft, desired):
        target = desired[task]
        assert target is not None
        lag = roster.lag(target, task)
        ready = lag is not None and (
            lag <= config.handoff_lag or (probe_due and roster.caught_up(target, task))
        )
        if ready:
            if target in draft.warmups[task]:
                draft.note(EventKind.WARMUP_PROMOTED, target, task)
            draft.revoke(task, successor=target)
        elif target not in draft.standbys[task]:
            waiting.append(task)
    waiting += [t for t, m in sorted({**held, **ahead}.items()) if m not in draft.standbys[t]]
    waiting = list(dict.fromkeys(waiting))  # a task moving elsewhere may also be warming ahead
    budget = WarmupBudget(config.max_warmup_replicas, config.max_warmup_replicas_total, busy)
    urgency = _Urgency(draft, roster, held_first, frozenset(restores), frozenset(ahead))
    _start_warmups(draft, wanted, waiting, budget, roster, urgency)


def _moving(draft: Draft, desired: Sequence[int | None]) -> list[int]:
    """Tasks with a current owner (not yet revoked) whose balanced owner is someone else."""
    return [
        task
        for task in range(draft.partitions)
        if (owner := draft.owner(task)) is not None and desired[task] is not None and desired[task] != owner
    ]


def _cancel_unwanted_warmups(draft: Draft, desired: Sequence[int | None]) -> None:
    """A warmup is kept only on the task's balanced owner while that owner does not own it yet."""
    for task in range(draft.partitions):
        for member in draft.warmups[task]:
            if member != desired[task] or draft.active[task] == member:
                draft.drop_warmup(task, member)


def _start_warmups(
    draft: Draft,
    desired: Sequence[int | None],
    waiting: list[int],
    budget: WarmupBudget,
    roster: Roster,
    urgency: _Urgency,
) -> None:
    """Keep the warmups already running, start new ones — a lost member's tasks first (outside the
    budget when they restore a task the engine chose to restore: `restores`), then draining members' —
    within budget.

    Running warmups claim their destination's slots first (a restore half done is not thrown away for
    a fresh one); one that no longer fits (the budget was lowered) is dropped. New ones are taken owner
    by owner: a round then revokes all the moving tasks of a few owners rather than one task of
    each, and every owner that gives up a task costs a write of its target and an acknowledgement
    (a scale-out of 100,000 tasks to 1,000 members otherwise touched ~900 owners every round of an
    API server that takes a few dozen writes a second: bench/results/apiscale.md). None starts on a
    member that has not reported since its pod started: which tasks it should take depends on the
    local state its report will list.
    """
    restores = urgency.restores
    running = [t for t in waiting if draft.warmups[t]]
    fresh = sorted((t for t in waiting if not draft.warmups[t]), key=urgency.order)
    for task in sorted(running, key=urgency):
        for member in draft.warmups[task]:
            if task in restores:
                budget.take(member)
            elif not budget.admit(member, urgency.down(task)):
                draft.drop_warmup(task, member)
    for task in fresh:
        target = desired[task]
        assert target is not None
        if not roster.reported(target):
            continue
        if task in restores:
            budget.take(target)
            draft.add_warmup(task, target)
        elif budget.admit(target, urgency.down(task)):
            draft.add_warmup(task, target)


@dataclass(frozen=True)
class _Urgency:
    """Which warmup goes first: restores of a lost member's tasks (nobody processes those tasks), then
    their insurance when they are down (`held_first`), then a draining member's tasks, then balance;
    pre-warmed insurance under `delay`, then copies warmed ahead of a rolling update (`ahead`), last."""

    draft: Draft
    roster: Roster
    held_first: bool
    restores: frozenset[int]
    ahead: frozenset[int]

    def __call__(self, task: int) -> int:
        owner = self.draft.active[task]
        if task in self.restores:
            return 0
        if owner is not None and owner in self.draft.reservations:
            return 1 if self.held_first else 4
        if task in self.ahead:
            return 5
        if owner is not None and self.roster.is_draining(owner):
            return 2
        return 3

    def down(self, task: int) -> bool:
        """Whether the task is held for a lost member: nobody processes it."""
        owner = self.draft.active[task]
        return owner is not None and owner in self.draft.reservations

    def order(self, task: int) -> tuple[int, int, int]:
        """New warmups: by urgency, then grouped by current owner, then by task."""
        owner = self.draft.active[task]
        return (self(task), -1 if owner is None else owner, task)
