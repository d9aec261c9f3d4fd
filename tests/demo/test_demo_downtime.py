"""The demo's downtime per task: the longest gap between commits, from the manifests' commit times."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from demo import downtime
from demo.commits import Commit, CommitLog
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Kind, Manifest


def commit(partition: int, at: float, end: int = 0) -> Commit:
    return Commit(partition, seq=0, start=0, end=end, owner="counts-0", at=at)


def test_longest_gap_is_the_longest_stand_still_with_the_usual_gap_beside_it() -> None:
    gap = downtime.longest_gap([0.5, 1.5, 2.5, 10.5, 11.5], partition=3, since=0.0, until=12.0)
    assert gap == downtime.Gap(partition=3, seconds=8.0, ends=10.5, usual=1.0, commits=5)


def test_the_window_edges_count_as_gaps_too() -> None:
    at_the_end = downtime.longest_gap([1.0, 2.0], partition=0, since=0.0, until=20.0)
    assert (at_the_end.seconds, at_the_end.ends) == (18.0, 20.0)
    never = downtime.longest_gap([], partition=0, since=5.0, until=9.0)
    assert (never.seconds, never.usual, never.commits) == (4.0, 0.0, 0)


def test_per_task_keeps_each_partition_and_the_window_apart() -> None:
    commits = [commit(0, t) for t in (1.0, 2.0, 3.0, 50.0)] + [commit(1, t) for t in (1.0, 7.0, 8.0)]
    gaps = downtime.per_task(commits, partitions=2, since=1.0, until=8.0)
    assert [(g.partition, g.seconds, g.commits) for g in gaps] == [(0, 5.0, 3), (1, 6.0, 3)]


def test_table_names_the_events_during_each_gap() -> None:
    gaps = [downtime.Gap(0, 12.0, 130.0, 1.0, 40), downtime.Gap(1, 1.5, 20.0, 1.0, 41)]
    events = [(100.0, "app created"), (120.0, "scale 2 → 3"), (126.0, "SIGKILL m0's executor")]
    lines = downtime.table(gaps, events, origin=100.0).splitlines()
    assert lines[1].split()[:6] == ["0", "12.0s", "1.0s", "40", "18.0s", "30.0s"]
    assert lines[1].endswith("  scale 2 → 3; SIGKILL m0's executor")
    assert lines[2].endswith("-")  # nothing happened while it stood still


def write(state: StateLayout, partition: int, found: Manifest, mtime: float) -> None:
    manifests.create(state, partition, found)
    path = Path(str(state.store.describe())) / state.manifest(partition, found.seq)
    os.utime(path, (mtime, mtime))


def test_commit_log_reads_accepted_batches_with_their_file_times(tmp_path: Path) -> None:
    state = StateLayout(tmp_path)
    write(state, 0, Manifest(0, 1, Kind.FENCE, 0, 0, owner="counts-0"), 100.0)
    write(state, 0, Manifest(1, 1, Kind.BATCH, 0, 10, owner="counts-0"), 101.0)
    log = CommitLog(state, partitions=2)
    log.poll()
    write(state, 0, Manifest(2, 2, Kind.FENCE, 10, 10, owner="counts-1"), 102.0)
    write(state, 0, Manifest(3, 1, Kind.BATCH, 10, 20, owner="counts-0"), 103.0)  # a fenced zombie
    write(state, 0, Manifest(4, 2, Kind.BATCH, 10, 25, owner="counts-1"), 104.0)
    log.poll()
    assert [(c.seq, c.start, c.end, c.owner, c.at) for c in log.commits] == [
        (1, 0, 10, "counts-0", 101.0),
        (4, 10, 25, "counts-1", 104.0),
    ]
    assert (log.committed(0), log.committed(1)) == (25, 0)
    assert (log.last_commit(0), log.last_commit(1)) == (pytest.approx(104.0), None)
