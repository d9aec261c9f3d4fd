"""When each step of a task's handoff was seen from outside: revoke, ack, assign, the new owner active.

A test polls the StreamAppMembers (and the reports of the processes running now) and feeds each
poll to `HandoffTimeline.saw`; a step is stamped the first time a poll shows it, so the stamps are as
precise as the polling. Read beside the commit manifests' times, they say where a task's stand-still
went: waiting for the old owner to let go, for the operator to reassign, or for the new owner.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from demo.commits import Commit
from demo.downtime import Gap
from streamapp.api.member import StreamAppMemberSpec, StreamAppMemberStatus


class HandoffTimeline:
    """First-seen times of (task, step) events, e.g. `revoke m2 g7`, `ack m2 g7`, `assign m0 e3`."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int, str]] = []
        self._seen: set[tuple[int, str]] = set()
        self._revoking: dict[tuple[str, int], int] = {}

    def _stamp(self, at: float, task: int, label: str) -> None:
        if (task, label) not in self._seen:
            self._seen.add((task, label))
            self.events.append((at, task, label))

    def saw(
        self, at: float, members: Sequence[Mapping[str, Any]], reports: Mapping[str, list[dict[str, Any]]]
    ) -> None:
        """One poll: the members' specs and statuses, and the current reports by member name."""
        for member in members:
            name = str(member["metadata"]["name"])
            short = "m" + name.rsplit("-", 1)[-1]
            spec = StreamAppMemberSpec.from_dict(member.get("spec") or {})
            acked = StreamAppMemberStatus.from_dict(member.get("status") or {}).observed_generation or 0
            for task in spec.revoking_epochs():
                generation = self._revoking.setdefault((name, task), spec.generation)
                self._stamp(at, task, f"revoke {short} g{generation}")
                if acked >= generation:
                    self._stamp(at, task, f"ack {short} g{generation}")
            for task in [t for (n, t) in self._revoking if n == name and t not in spec.revoking_epochs()]:
                del self._revoking[(name, task)]
            for task, epoch in spec.active_epochs().items():
                self._stamp(at, task, f"assign {short} e{epoch}")
            for report in reports.get(name, []):
                if report.get("role") == "active":
                    self._stamp(at, int(report["task"]), f"active {short} e{report.get('epoch')}")

    def during(self, task: int, since: float, until: float) -> list[tuple[float, str]]:
        """The task's events within `[since, until]`."""
        return [(at, label) for at, t, label in self.events if t == task and since <= at <= until]


def gaps_apart(
    commits: Sequence[Commit], timeline: HandoffTimeline, partitions: int, since: float, until: float
) -> tuple[list[float], list[float]]:
    """Every gap between two commits of a task within `[since, until]`, split in two: those with a
    step of that task's handoff seen inside (a stand-still the protocol caused) and those with none
    (how far batches alone stretch on this machine, the yardstick for the first)."""
    handing, plain = [], []
    for partition in range(partitions):
        times = sorted(c.at for c in commits if c.partition == partition and since <= c.at <= until)
        for earlier, later in itertools.pairwise(times):
            inside = timeline.during(partition, earlier, later)
            (handing if inside else plain).append(later - earlier)
    return handing, plain


def batch_interval_before(
    commits: Sequence[Commit], partition: int, moment: float, batches: int = 5
) -> float:
    """The median gap between the partition's last `batches` commits up to `moment`: how long one
    batch took just before a stand-still that started there (batches slow down under load)."""
    times = sorted(c.at for c in commits if c.partition == partition and c.at <= moment)[-(batches + 1) :]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    return statistics.median(gaps) if gaps else 0.0


def gap_lines(
    gaps: Sequence[Gap], commits: Sequence[Commit], timeline: HandoffTimeline, origin: float
) -> list[str]:
    """One line per task: its longest gap, one batch just before it, and the handoff steps inside it
    (times in seconds since `origin`)."""
    lines = ["task  longest gap  batch before  commits  from     to       handoff steps seen in the gap"]
    for gap in gaps:
        starts = gap.ends - gap.seconds
        before = batch_interval_before(commits, gap.partition, starts)
        steps = "; ".join(
            f"{at - origin:.1f} {label}" for at, label in timeline.during(gap.partition, starts, gap.ends)
        )
        lines.append(
            f"{gap.partition:>4}  {gap.seconds:>10.1f}s  {before:>11.1f}s  {gap.commits:>7}"
            f"  {starts - origin:>6.1f}s  {gap.ends - origin:>6.1f}s  {steps or '-'}"
        )
    return lines
