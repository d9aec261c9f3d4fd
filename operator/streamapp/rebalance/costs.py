"""What restarting a member in place and handing a task off cost, as executors measured them (pure).

An executor reports, per task, how long the task stood still when its ownership on that member began
and how it came there: by a `restart` of the member, a `handoff` to a caught-up copy, or `cold`
(`TaskReport.resumedAfter`, `resumedBy`). A member's restart cost is the slowest of its tasks resumed
by a restart (the one a rollout waits for); the app's handoff cost is the median over every task
resumed by a handoff (one slow move must not decide for the app). A rolling update's `auto` weighs
one against the other (`rollout.choose`); the operator reads the samples from member reports
(`controller/costreports.py`), the simulator from its simulated executors, and both keep the last known
values with `merged`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass(frozen=True)
class Costs:
    """What `auto` weighs, as the executors measured it (`TaskReport.resumedAfter`) and the operator
    keeps it: per member, how long its tasks stood still when its pod last restarted (the slowest
    task); how long a task handed off to a caught-up copy stood still (the median); and whether the
    members keep their local state on a claim (`executor.storage.size`), without which a restart
    restores every task in full and the last measured restart says nothing about the next. Beside
    them, how long the app's pods take to become ready (`pod_start`, the operator's measure): a
    member's restart takes at least that, which is what `auto` expects of one never measured. And how
    fast the app's members restore (`restore_rate`, rows a second: the median of their measures), which
    a member keeps only while it exists: a scale-in removes the one that measured it, and the next loss
    would otherwise be weighed with no rate at all."""

    restart: Mapping[int, float] = field(default_factory=dict)
    handoff: float | None = None
    claims: bool = False
    pod_start: float | None = None
    restore_rate: float | None = None


UNMEASURED = Costs()
"""Nothing measured yet: `auto` hands off."""


class Sample(NamedTuple):
    """One task's resumption: how it came (`restart`, `handoff` or `cold`) and how long it stood still."""

    by: str
    seconds: float


def restart_seconds(samples: Iterable[Sample]) -> float | None:
    """A member's restart cost: its slowest task resumed by a restart (the one a rollout waits for)."""
    return max((s.seconds for s in samples if s.by == "restart"), default=None)


def handoff_seconds(samples: Iterable[Sample]) -> float | None:
    """The handoff cost: the median stand-still of tasks resumed by a handoff, to one decimal."""
    found = [s.seconds for s in samples if s.by == "handoff"]
    return round(statistics.median(found), 1) if found else None


def merged(old: Costs, new: Costs) -> Costs:
    """`new`'s values where it has them, `old`'s otherwise."""
    handoff = new.handoff if new.handoff is not None else old.handoff
    pod_start = new.pod_start if new.pod_start is not None else old.pod_start
    rate = new.restore_rate if new.restore_rate is not None else old.restore_rate
    return Costs({**old.restart, **new.restart}, handoff, new.claims, pod_start, rate)


def expected_return(member: int, restart: Mapping[int, float], pod_start: float | None) -> float | None:
    """How long after its loss a member whose pod is visibly starting again is expected to process its
    tasks again (`MemberView.return_seconds`): its own measured restart, else the median of the app's
    members' measured restarts, else how long the app's pods take to become ready (a restart takes at
    least that); None when none of them was measured."""
    if member in restart:
        return restart[member]
    if restart:
        return float(statistics.median(restart.values()))
    return pod_start
