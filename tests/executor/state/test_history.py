"""Manifests pruned below what readers start from: the history read whole is unchanged (archives, then
live manifests, also across a prune in the middle of a read), a long-fenced writer cannot commit into
a pruned name, and a copy left behind the floor restores from a snapshot."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from dataplane_checks import commit

from manifestfeed import published_after
from streamapp.executor.state import changelog, history, snapshots, tiers
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.blobstore import FileStore
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


def test_a_partition_pruned_all_day_keeps_a_bounded_number_of_archives(tmp_path: Path) -> None:
    """A prune after every few batches adds an archive each time; merged by size tiers, the count
    stays at most `tiers.MAX_RUNS` and the history read whole is every accepted manifest."""
    layout = StateLayout(tmp_path)
    head = a_history(layout)
    counts = []
    for batch in range(240):
        head = commit(layout, head, {f"k{batch % 7}": batch}, epoch=3)
        if batch % 3 == 2:
            history.prune(layout, 0, below=head.seq - 1)
            counts.append(len(list((tmp_path / "history/p=0").glob("archive-*.json"))))
    assert len(counts) == 80 and max(counts) <= tiers.MAX_RUNS, counts
    whole = list(history.accepted_manifests(layout, 0))
    assert [m.seq for m in whole] == [s for s in range(head.seq + 1) if s != 11], "all but the refused one"
    reading = history.accepted_manifests(layout, 0)
    first = [next(reading) for _ in range(50)]
    for batch in range(30):  # prunes and merges while the read is under way
        head = commit(layout, head, {"k": batch}, epoch=3)
        history.prune(layout, 0, below=head.seq - 1)
    assert [m.seq for m in first + list(reading)] == [m.seq for m in history.accepted_manifests(layout, 0)]


def test_a_history_an_earlier_version_pruned_reads_and_prunes_on(tmp_path: Path) -> None:
    """Earlier versions named an archive by its end alone and kept the floor in floor.json only."""
    layout = StateLayout(tmp_path)
    head = a_history(layout)
    whole = list(history.accepted_manifests(layout, 0))
    history.prune(layout, 0, below=8)
    history.prune(layout, 0, below=21)
    folder = tmp_path / "history/p=0"
    for archive in folder.glob("archive-*-from-*.json"):
        archive.rename(folder / f"{archive.name.partition('-from-')[0]}.json")
    for mark in (folder / "floors").iterdir():
        mark.unlink()
    assert manifests.floor(layout, 0).seq == 20, "floor.json still counts"
    assert list(history.accepted_manifests(layout, 0)) == whole
    for batch in range(12):
        head = commit(layout, head, {"k": batch}, epoch=3)
        history.prune(layout, 0, below=head.seq - 1)
    assert [m.seq for m in history.accepted_manifests(layout, 0)] == [
        s for s in range(head.seq + 1) if s != 11
    ]


class CrashingMerges(FileStore):
    """A store whose owner dies after deleting `survive` archives: a merge is left half done."""

    def __init__(self, root: Path, survive: int) -> None:
        super().__init__(root)
        self.survive = survive

    def delete(self, name: str) -> None:
        if "/archive-" in name:
            if self.survive == 0:
                raise OSError("the executor died here")
            self.survive -= 1
        super().delete(name)


@pytest.mark.parametrize("survive", [0, 5])
def test_merges_a_crash_interrupted_leave_the_history_whole(tmp_path: Path, survive: int) -> None:
    layout = StateLayout(tmp_path)
    head = a_history(layout)
    crashing = StateLayout(CrashingMerges(tmp_path, survive))
    crashed = False
    for batch in range(120):
        head = commit(layout, head, {"k": batch}, epoch=3)
        if batch % 2:
            try:
                history.prune(crashing if not crashed else layout, 0, below=head.seq - 1)
            except OSError:
                crashed = True  # the next owner goes on from what is left
            seqs = [m.seq for m in history.accepted_manifests(layout, 0)]
            assert seqs == [s for s in range(head.seq + 1) if s != 11], (batch, survive)
    assert crashed
    assert len(list((tmp_path / "history/p=0").glob("archive-*.json"))) <= tiers.MAX_RUNS + 1


class Overtaken(FileStore):
    """The store as a revoked owner's prune sees it: a newer prune runs to its end just before this
    one writes its floor (it read the floor, archived and was about to move it)."""

    def __init__(self, root: Path, newer: Callable[[], object]) -> None:
        super().__init__(root)
        self.newer: Callable[[], object] | None = newer

    def _floor_written(self, name: str) -> None:
        if "floor" in name and self.newer is not None:
            newer, self.newer = self.newer, None
            newer()

    def put(self, name: str, data: bytes) -> None:
        self._floor_written(name)
        super().put(name, data)

    def create(self, name: str, data: bytes) -> bool:
        self._floor_written(name)
        return super().create(name, data)


def test_a_prune_a_revoked_owner_finishes_late_does_not_move_the_floor_back(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    a_history(layout)
    whole = list(history.accepted_manifests(layout, 0))
    stale = StateLayout(Overtaken(tmp_path, lambda: history.prune(layout, 0, below=21)))
    history.prune(stale, 0, below=8)
    assert manifests.floor(layout, 0).seq == 20
    assert manifests.floor_copy(layout, 0).seq == 20, "the copy every commit reads"
    assert history.prune(layout, 0, below=25) == 4, "the next prune starts where the newer one ended"
    assert list(history.accepted_manifests(layout, 0)) == whole
    with pytest.raises(Fenced):  # a writer long fenced is still told so in the range pruned last
        manifests.create(layout, 0, Manifest(seq=22, epoch=1, kind=Kind.BATCH, start=5, end=6))


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


def test_a_copy_restoring_its_first_snapshot_reports_the_owners_offset_not_zero(tmp_path: Path) -> None:
    """Until its snapshot is in, a new copy has applied nothing; with the first manifests pruned it
    found no manifest after its empty head and reported the owner at offset 0, i.e. caught up."""
    layout = StateLayout(tmp_path)
    head = a_history(layout)
    history.prune(layout, 0, below=21)
    fresh = Replica(layout, 0)
    assert fresh.head == Head()
    assert fresh.owner_offset() == head.offset
    assert manifests.lag(fresh.owner_offset(), fresh.head) == head.offset
    for seq in range(21, head.seq + 1):  # every manifest above the floor gone as well
        layout.store.delete(layout.manifest(0, seq))
    assert fresh.owner_offset() == manifests.floor(layout, 0).offset > 0


def test_a_copy_whose_next_manifests_were_pruned_reports_the_owner_ahead_not_caught_up(
    tmp_path: Path,
) -> None:
    """A copy kept at seq 5 (a checkpoint left on a member's volume) while the history after it was
    compacted into a snapshot: the manifest after its head is gone, and probing for newer ones from
    there found none — it reported lag 0, caught up, and was promoted with a full restore ahead of it."""
    layout = StateLayout(tmp_path)
    newest = a_history(layout)
    head = Head()
    for found, step in published_after(layout, 0, head):
        head = step.head
        if found.seq == 5:
            break
    history.prune(layout, 0, below=21)
    kept = Replica(layout, 0)
    kept.head = head
    assert kept.owner_offset() == newest.offset
    assert manifests.lag(kept.owner_offset(), kept.head) == newest.offset - head.offset > 0
