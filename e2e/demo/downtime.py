"""Measured downtime per task: the longest gap between consecutive commits of its partition; pure.

While input flows at a fixed rate a healthy task commits a batch every few seconds, so the longest
gap inside a window is how long the task stood still at worst: a handoff, a restart or a restore shows
up as a gap much longer than the usual one (the median, reported beside it).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from demo.commits import Commit


@dataclass(frozen=True)
class Gap:
    """The longest stand-still of one partition: `seconds` long, ending at `ends` (epoch seconds)."""

    partition: int
    seconds: float
    ends: float
    usual: float
    commits: int


def commit_times(commits: Iterable[Commit], partition: int, since: float, until: float) -> list[float]:
    """Sorted commit times of one partition within `[since, until]`."""
    return sorted(c.at for c in commits if c.partition == partition and since <= c.at <= until)


def longest_gap(times: Sequence[float], partition: int, since: float, until: float) -> Gap:
    """The longest interval without a commit in `[since, until]`, bounded by the window's edges too
    (a task that never commits in the window stood still all of it)."""
    edges = [since, *times, until]
    gaps = [(later - earlier, later) for earlier, later in itertools.pairwise(edges)]
    seconds, ends = max(gaps)
    between = [later - earlier for earlier, later in itertools.pairwise(times)]
    usual = statistics.median(between) if between else 0.0
    return Gap(partition, seconds, ends, usual, len(times))


def per_task(commits: Sequence[Commit], partitions: int, since: float, until: float) -> list[Gap]:
    """The longest gap of every partition over the window."""
    return [longest_gap(commit_times(commits, p, since, until), p, since, until) for p in range(partitions)]


def table(gaps: Sequence[Gap], events: Sequence[tuple[float, str]], origin: float) -> str:
    """The gaps as a text table, times in seconds since `origin`, each with the events that happened
    while the task stood still (what caused it)."""
    lines = ["task  longest gap  usual gap  commits  from      to        events meanwhile"]
    for gap in gaps:
        starts = gap.ends - gap.seconds
        during = [label for at, label in events if starts <= at <= gap.ends]
        lines.append(
            f"{gap.partition:>4}  {gap.seconds:>10.1f}s  {gap.usual:>8.1f}s  {gap.commits:>7}"
            f"  {starts - origin:>7.1f}s  {gap.ends - origin:>7.1f}s  {'; '.join(during) or '-'}"
        )
    return "\n".join(lines)
