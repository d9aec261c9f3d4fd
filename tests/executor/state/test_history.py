"""Manifests pruned below what readers start from: the history read whole is unchanged (archives, then
live manifests, also across a prune in the middle of a read), a long-fenced writer cannot commit into
a pruned name, and a copy left behind the floor restores from a snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from dataplane_checks import commit

from manifestfeed import published_after
from streamapp.executor.state import changelog, history, snapshots
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Fenced, Head, Kind, Manifest
from streamapp.executor.state.replica import Replica, rebuild
from streamapp.executor.state.retention import Mark


def fence(layout: StateLayout, head: Head, epoch: int) -> Head:
    found = Manifest(seq=head.next_seq, epoch=epoch, kind=Kind.FENCE, start=head.offset, end=head.offset)
    manifests.create(layout, 0, found)
    return manifests.advance(head, found).head


def a_history(layout: StateLayout) -> Head:
    """30 manifests over three epochs, with a refused manifest of a fenced writer among them."""
    head = Head()
    for batch in range(10):
        head = commit(layout, head, {f"k{batch % 4}": batch})
    head = fence(layout, head, 2)
    zombie = Manifest(seq=head.next_seq, epoch=1, kind=Kind.BATCH, start=head.offset, end=head.offset + 1)
    manifests.create(layout, 0, zombie)  # landed after the fence: refused by every reader
    head = manifests.advance(head, zombie).head
    for batch in range(10, 18):
        head = commit(layout, head, {f"k{batch % 4}": batch}, epoch=2)
    head = fence(layout, head, 3)
    for batch in range(18, 27):
        head = commit(layout, head, {f"k{batch % 4}": batch}, epoch=3)
    return head


def manifest_files(tmp_path: Path) -> list[int]:
    return sorted(int(p.stem) for p in (tmp_path / "commits/p=0").glob("*.json"))


def test_the_history_reads_the_same_after_pruning_in_steps(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    a_history(layout)
    whole = list(history.accepted_manifests(layout, 0))
    assert all(m.seq != 11 for m in whole), "the fenced writer's manifest is not accepted"
    assert history.prune(layout, 0, below=8) == 8
    assert manifest_files(tmp_path)[0] == 8
    assert history.prune(layout, 0, below=8) == 0, "nothing new to prune"
    assert history.prune(layout, 0, below=21) == 13
    assert manifest_files(tmp_path) == list(range(21, 30))
    assert list(history.accepted_manifests(layout, 0)) == whole
    assert manifests.floor(layout, 0) == Head(seq=20, offset=18, epoch=3), "the head at the fence to 3"


def test_a_read_that_a_prune_overtakes_goes_on_from_the_archive(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    a_history(layout)
    whole = list(history.accepted_manifests(layout, 0))
    reading = history.accepted_manifests(layout, 0)
    first = [next(reading) for _ in range(5)]
    history.prune(layout, 0, below=25)
    assert first + list(reading) == whole


def test_a_long_fenced_writer_cannot_commit_into_a_pruned_name(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    a_history(layout)
    history.prune(layout, 0, below=21)
    stale = Manifest(seq=5, epoch=1, kind=Kind.BATCH, start=5, end=6)
    with pytest.raises(Fenced) as fenced:
        manifests.create(layout, 0, stale)
    assert fenced.value.theirs == 3, "the epoch the history stood at where it was pruned"
    assert manifests.read(layout, 0, 5) is None, "its manifest is deleted again"


def test_a_copy_behind_the_floor_restores_from_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("streamapp.executor.state.replica.FLOOR_CHECK_SECONDS", 0.0)
    layout = StateLayout(tmp_path)
    behind = Replica(layout, 0)
    head = Head()
    for batch in range(3):
        head = commit(layout, head, {f"k{batch}": batch})
    behind.catch_up()
    for batch in range(3, 20):
        head = commit(layout, head, {f"k{batch % 5}": batch})
    snapshots.write(layout, 0, head, "long")
    history.prune(layout, 0, below=head.seq)
    behind.catch_up()
    assert behind.head == head
    assert behind.full_restores == 1 and behind.full_restore_reason == "delta-expired"
    assert dict(behind.state.items()) == dict(rebuild(layout, 0).state.items())


def test_pruning_stops_below_every_kept_checkpoint(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    head = a_history(layout)
    changelog.write_mark(layout, 0, Mark("member-a", 10, 0.0))  # a fence: its anchor is batch 9
    assert history.readers_start(layout, 0, covered=head.seq) == 9
    assert history.readers_start(layout, 0, covered=4) == 4


def test_an_observer_behind_the_floor_goes_on_from_the_archives(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    a_history(layout)
    whole = [m.seq for m in history.accepted_manifests(layout, 0)]
    head, seen = Head(), []
    for found, step in published_after(layout, 0, head):
        seen.append(found.seq)
        head = step.head
        if found.seq == 4:
            break
    history.prune(layout, 0, below=25)
    for found, step in published_after(layout, 0, head):
        if step.accepted:
            seen.append(found.seq)
        head = step.head
    assert seen == whole and head.seq == 29
