"""Epochs never go below one the store has seen, and a fenced owner is given a new one.

Epochs live in the persisted assignment, but the shared state store remembers them too: every commit
manifest carries its writer's epoch, and a writer whose epoch is below the store's loses every commit
race. When the assignment forgets (the app deleted and re-created on the same store, a status restored
from a backup) epochs would restart at 1 and every owner would be fenced by the store, tailing instead
of processing while reporting itself active. Members report the highest epoch they have seen in the
store per task; the draft never hands out an epoch at or below it (`Draft.assign`), and an owner found
running under a lower one is given a new epoch above it in place (`Draft.refence`): it keeps the task
and its state, and its next takeover fences the store at the new epoch.
"""

from __future__ import annotations

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.model import Assignment
from streamapp.rebalance.roster import Roster


def refence_owners(draft: Draft) -> tuple[int, ...]:
    """Give every owner running under an epoch below the store's a new epoch; returns those tasks.

    A task being revoked is left alone: its owner must still acknowledge, and its next owner gets an
    epoch above the store's anyway.
    """
    fenced = [
        task
        for task in range(draft.partitions)
        if draft.owner(task) is not None and draft.epoch[task] < draft.floor[task]
    ]
    for task in fenced:
        draft.refence(task)
    return tuple(fenced)


def still_fenced(assignment: Assignment, roster: Roster) -> tuple[int, ...]:
    """Tasks whose active owner still reports running fenced (it has not applied its new epoch yet)."""
    return tuple(
        task
        for task, t in enumerate(assignment.tasks)
        if t.active is not None
        and t.revoking_since is None
        and (view := roster.members.get(t.active)) is not None
        and task in view.fenced
    )
