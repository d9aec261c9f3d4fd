"""The stop-the-world baseline: every membership change revokes everything, then reassigns by range.

This is how the classic consumer protocol with the range assignor behaves, and what the other
protocols are measured against: no delay for a lost member, no stickiness, no warmups.
"""

from __future__ import annotations

from streamapp.rebalance.draft import Draft
from streamapp.rebalance.reservations import HoldRules, settle
from streamapp.rebalance.roster import Roster


def plan_eager(draft: Draft, roster: Roster, now: float) -> None:
    """Revoke all on a membership change; once nobody owns anything, assign contiguous ranges."""
    settle(draft, roster, HoldRules(delay=0.0, failover_to_standby=False), now)
    for task in range(draft.partitions):
        draft.standbys[task] = ()
        draft.warmups[task] = ()
    if roster.live != draft.membership:
        for task in range(draft.partitions):
            draft.revoke(task)
        if any(owner is not None for owner in draft.active):
            return
        draft.membership = roster.live
    for task, member in enumerate(range_assignment(draft.partitions, roster.live)):
        if draft.active[task] is None and member is not None:
            draft.assign(task, member)


def range_assignment(partitions: int, members: tuple[int, ...]) -> list[int | None]:
    """Contiguous ranges over the sorted members; the first `partitions mod n` get one more."""
    if not members:
        return [None] * partitions
    share, extra = divmod(partitions, len(members))
    owners: list[int | None] = []
    for index, member in enumerate(members):
        owners.extend([member] * (share + (1 if index < extra else 0)))
    return owners
