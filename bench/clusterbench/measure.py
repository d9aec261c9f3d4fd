"""What one phase cost, measured from outside the executors; pure.

Inputs are what an observer sees on the shared store: every accepted batch with the time its manifest
was published (`Commit`), and every input record's append timestamp. From them, per phase window:

- commit gaps per task: the longest interval between two commits of a partition (a task that stood
  still), and the *stall*: every gap's excess over the task's usual cadence, summed over the window's
  gaps and tasks. The usual cadence is the task's median gap in the run's *quiet stretches*: the
  steady input before the first phase and each phase's hold once every app has recovered — the same
  moments for all apps. Its median over the whole run depended on the protocol being measured: one
  that left tasks waiting for 120 s, or slowed its members in its own phases, got a longer cadence
  (1.09 s against 1.04 s in quiet stretches, over ~400 gaps of a phase ~16 task-seconds less stall). No threshold: a threshold (twice the cadence, as
  before) made a row jump between 0 and a few seconds as gaps crossed it from run to run. So a phase
  in which every batch slowed down (a new executor's JVM and restores competing for the same cores)
  stalls too, by what its slower batches added; the app's median gap in the phase is reported beside
  it, and the *stand-still* (the longest single gap's excess: a task that stopped, not one that slowed)
  to tell the two apart;
- end-to-end latency: a record's append time to the publication of the manifest of the batch that
  committed it, percentiles over the records appended in the window;
- the worst 60-s window of committed input records, as a fraction of the input rate.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from demo.commits import Commit

WINDOW_S = 60.0


@dataclass(frozen=True)
class Gaps:
    """Commit gaps of one phase over all tasks: the longest, and the summed stalls."""

    longest_s: float
    longest_task: int
    stall_s: float
    stalled_tasks: int
    worst_task_stall_s: float
    phase_cadence_s: float
    standstill_s: float = 0.0
    moves_stall_s: float = 0.0  # the part of stall_s in gaps across a change of owner: the moves' own cost
    moves: int = 0  # gaps across a change of owner


@dataclass(frozen=True)
class Latency:
    """Append-to-commit latency percentiles (seconds) of the records appended in a window."""

    records: int
    p50_s: float
    p99_s: float
    max_s: float


def usual_gap(
    commits: Sequence[Commit], partition: int, quiet: Sequence[tuple[float, float]] | None = None
) -> float:
    """The median interval between a partition's commits that lie wholly within a `quiet` stretch
    (the whole run when none is given or none falls in one): its batch cadence."""
    times = sorted(c.at for c in commits if c.partition == partition)
    between = [(a, b) for a, b in itertools.pairwise(times)]
    if quiet:
        inside = [(a, b) for a, b in between if any(s <= a and b <= e for s, e in quiet)]
        between = inside or between
    return statistics.median(b - a for a, b in between) if between else 0.0


def phase_gaps(commits: Sequence[Commit], usual: Mapping[int, float], since: float, until: float) -> Gaps:
    """Gaps of every partition inside `[since, until]`. A gap is bounded on the left by the partition's
    last commit before `since` (the stand-still the phase's action started counts whole) and on the right
    by `until` (a task that has not committed again by the window's end stood still until then); its
    excess over the task's usual cadence is its stall."""
    edges = {p: _edges(commits, p, since, until) for p in usual}
    phase = phase_cadence([[at for at, _ in times] for times in edges.values()])
    longest, longest_task, stall, stalled, worst, standstill, moves, moved = 0.0, -1, 0.0, 0, 0.0, 0.0, 0.0, 0
    for partition, cadence in usual.items():
        task_stall = 0.0
        for (earlier, before), (later, after) in itertools.pairwise(edges[partition]):
            gap = later - earlier
            if gap > longest:
                longest, longest_task = gap, partition
            task_stall += max(0.0, gap - cadence)
            standstill = max(standstill, gap - cadence)
            if before is not None and after is not None and before != after:
                moves += max(0.0, gap - cadence)
                moved += 1
        stall += task_stall
        stalled += task_stall > 0
        worst = max(worst, task_stall)
    return Gaps(longest, longest_task, stall, stalled, worst, phase, standstill, moves, moved)


def _edges(
    commits: Sequence[Commit], partition: int, since: float, until: float
) -> list[tuple[float, str | None]]:
    """The partition's commits (time, owner) inside the window, bounded by its last commit before and
    by `until` (no owner: the window's edges are not commits)."""
    times = sorted((c.at, c.owner) for c in commits if c.partition == partition and c.at <= until)
    before = [t for t in times if t[0] < since]
    inside = [t for t in times if t[0] >= since]
    first: tuple[float, str | None] = before[-1] if before else (since, None)
    return [first, *inside, (until, None)]


def phase_cadence(edges: Iterable[Sequence[float]]) -> float:
    """The median interval between consecutive commits of any task of the app inside the window (the
    bounding intervals left out): how fast the app's batches went during the phase."""
    between = [b - a for times in edges for a, b in itertools.pairwise(times[1:-1])]
    return statistics.median(between) if between else 0.0


def latencies(commits: Sequence[Commit], stamps: Mapping[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every committed record's (append time, latency), from its partition's timestamps by offset."""
    appended, waited = [], []
    for commit in commits:
        times = stamps[commit.partition][commit.start : commit.end]
        appended.append(times)
        waited.append(commit.at - times)
    if not appended:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(appended), np.concatenate(waited)


def window_latency(appended: np.ndarray, waited: np.ndarray, since: float, until: float) -> Latency:
    """Percentiles over the records appended in `[since, until)`."""
    inside = waited[(appended >= since) & (appended < until)]
    if inside.size == 0:
        return Latency(0, 0.0, 0.0, 0.0)
    p50, p99 = np.percentile(inside, [50, 99])
    return Latency(int(inside.size), float(p50), float(p99), float(inside.max()))


def worst_window(commits: Sequence[Commit], rate: float, since: float, until: float) -> float:
    """The fewest input records committed in any `WINDOW_S`-second window inside `[since, until]`, over
    what arrived in it (`rate` records/s); a window shorter than the phase is the phase itself."""
    width = min(WINDOW_S, until - since)
    if width <= 0 or rate <= 0:
        return 0.0
    seconds = int(np.ceil(until - since))
    per_second = np.zeros(seconds + 1)
    for commit in commits:
        if since <= commit.at <= until:
            per_second[int(commit.at - since)] += commit.end - commit.start
    span = max(1, int(width))
    sums = np.convolve(per_second, np.ones(span), mode="valid")
    return float(sums.min()) / (rate * span)


def restore_counts(reports: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(pod UID, task) → (restoredBlocking, restoredBackground) from member reports (their status)."""
    return {
        (str(report.get("podUID")), int(task["task"])): (
            int(task.get("restoredBlocking") or 0),
            int(task.get("restoredBackground") or 0),
        )
        for report in reports
        for task in report.get("tasks") or []
    }


@dataclass
class RestoreCounter:
    """Rows restored, summed over every copy an executor reported, across resets.

    A member reports per copy the rows that copy has restored so far; a new pod or a copy dropped and
    made again starts from zero. The counter adds every increase it sees and takes a drop as a restart
    from zero, so its totals only grow. A copy is its pod and task, not its role: a warmup promoted
    to active keeps its replica and its counts, and keyed by role the promotion counted every row it
    had restored in the background a second time."""

    blocking: int = 0
    background: int = 0
    last: dict[tuple[str, int], tuple[int, int]] | None = None

    def observe(self, reports: Mapping[tuple[str, int], tuple[int, int]]) -> None:
        """`reports`: (pod UID, task) → (restoredBlocking, restoredBackground) as reported now."""
        last = self.last or {}
        for key, (blocking, background) in reports.items():
            before = last.get(key, (0, 0))
            self.blocking += blocking - before[0] if blocking >= before[0] else blocking
            self.background += background - before[1] if background >= before[1] else background
        self.last = {**last, **reports}
