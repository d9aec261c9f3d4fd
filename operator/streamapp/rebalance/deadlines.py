"""Revocations that wait too long: the member is declared lost so the handoff can go on.

A revocation ends when the owner acknowledges it or its pod is gone (`reservations.settle`). A member
whose acknowledgement never comes — a deaf watch, a batch stuck in user code — would otherwise hold the
task, and the whole rebalance, for good. Kafka bounds this wait (`max.poll.interval.ms`, KIP-848's
rebalance timeout); here a member still alive `revocationTimeout` after it was asked is named in the
plan, and the shell deletes its pod. Only then — once the pod is observed gone — is the task released
and assigned elsewhere, under a new epoch that fences the old process should it still be writing.
"""

from __future__ import annotations

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.model import Event, EventKind
from streamapp.rebalance.roster import Roster


def timed_out_members(draft: Draft, roster: Roster, timeout: float, now: float) -> tuple[int, ...]:
    """Members that let a revocation wait `timeout` or longer, after acknowledgements were settled.

    Their late revocations are re-stamped with `now`, so the pod that replaces the member gets a whole
    timeout to start and acknowledge before it is judged in turn.
    """
    late: dict[int, list[int]] = {}
    for task, since in enumerate(draft.revoking):
        owner, asked = draft.active[task], draft.revoking_at[task]
        if since is None or owner is None or asked is None or now < asked + timeout:
            continue
        if roster.alive(owner) and roster.acked(owner) < since:
            late.setdefault(owner, []).append(task)
    for member, tasks in sorted(late.items()):
        for task in tasks:
            draft.revoking_at[task] = now
        detail = f"not acknowledged within {timeout:g}s; its pod is replaced"
        draft.event(Event(EventKind.REVOCATION_TIMED_OUT, member, tuple(tasks), detail))
    return tuple(sorted(late))
