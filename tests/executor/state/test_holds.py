"""A reader's hold keeps the snapshot it restores from through the owner's pruning, however slow the
read; a dead reader's hold expires; a copy whose history is gone anyway starts over instead of failing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import pytest
from dataplane_checks import commit

from streamapp.executor.state import changelog, history, holds, snapshots
from streamapp.executor.state.blobstore import FileStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import CHECKPOINT, LocalState
from streamapp.executor.state.manifest import Head
from streamapp.executor.state.replica import HistoryGone, Replica, rebuild
from streamapp.executor.state.retention import Retention

KEEP = 2
RETENTION = Retention(seconds=180.0, max_bytes=1 << 30)


def owner_snapshot(layout: StateLayout, head: Head) -> None:
    """What the owner does after each snapshot (`Task._write_snapshot`): publish, then prune the
    snapshots, the changelog and the manifests behind the oldest kept one."""
    snapshots.write(layout, 0, head, "long")
    covered = snapshots.prune(layout, 0, KEEP, holds.held(layout, 0, time.time()))
    changelog.compact(layout, 0, covered, RETENTION, time.time())
    history.prune(layout, 0, history.readers_start(layout, 0, covered))


class Busy:
    """The owner's partition: commits batches and snapshots after each `every`."""

    def __init__(self, layout: StateLayout) -> None:
        self.layout = layout
        self.head = commit(layout, Head(), {f"k{i:04d}": i for i in range(1_000)})
        owner_snapshot(layout, self.head)
        self.round = 0

    def go_on(self, snapshots_taken: int) -> None:
        for _ in range(snapshots_taken):
            self.round += 1
            for step in range(3):
                self.head = commit(
                    self.layout, self.head, {f"k{self.round:04d}": -step, f"n{self.round}": step}
                )
            owner_snapshot(self.layout, self.head)


class SlowReader(FileStore):
    """A copy's view of the store over a slow link: while it opens its first run, the owner goes on
    and snapshots `during` times (a restore that takes minutes while snapshots come every ~20 s)."""

    def __init__(self, root: Path, owner: Busy, during: int) -> None:
        super().__init__(root)
        self.owner, self.during = owner, during

    @contextmanager
    def reader(self, name: str) -> Iterator[BinaryIO]:
        if name.startswith("runs/") and self.during:
            self.owner.go_on(self.during)
            self.during = 0
        with super().reader(name) as stream:
            yield stream


def test_a_snapshot_held_by_a_slow_reader_survives_the_owners_prunes(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    owner = Busy(layout)
    owner.go_on(1)
    newest = snapshots.read(layout, snapshots.newest_first(layout, 0)[0])
    assert len(newest.runs) >= 2, "the snapshot read has a run of its own, which pruning would delete"

    copy = Replica(StateLayout(SlowReader(tmp_path, owner, during=KEEP + 1)), 0, member="copy")
    assert copy.load_snapshot() == newest.rows
    assert copy.head == newest.head, "restored from the snapshot it started reading"
    assert copy.holding == newest.head.seq
    assert holds.held(layout, 0, time.time()) == {newest.head.seq}

    owner.go_on(KEEP + 1)  # the hold keeps it, and the history after it, through more prunes
    assert layout.snapshot(0, newest.head.seq) in snapshots.newest_first(layout, 0)
    copy.catch_up()
    assert copy.head == owner.head
    assert dict(copy.state.items()) == dict(rebuild(layout, 0).state.items())
    assert copy.holding is None and not layout.store.names(layout.holds(0)), "caught up: released"
    owner.go_on(1)
    assert layout.snapshot(0, newest.head.seq) not in snapshots.newest_first(layout, 0), "pruned once free"


def test_a_reader_without_a_hold_loses_its_snapshot_and_starts_again_from_the_newest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What holds prevent: a reader with no member name (a tool) places none, the owner's prunes delete
    the snapshot under it and every older one; it starts again from the newest, which they kept."""
    layout = StateLayout(tmp_path)
    owner = Busy(layout)
    owner.go_on(1)
    tool = Replica(StateLayout(SlowReader(tmp_path, owner, during=KEEP + 1)), 0)
    with caplog.at_level("WARNING"):
        tool.load_snapshot()
    assert "not restored" in caplog.text
    newest = snapshots.read(layout, snapshots.newest_first(layout, 0)[0])
    assert tool.head == newest.head
    assert tool.full_restores == 0


def test_a_dead_readers_hold_expires_and_is_deleted(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    owner = Busy(layout)
    owner.go_on(1)
    held = snapshots.newest_seq(layout, 0)
    now = time.time()
    holds.write(layout, 0, holds.Hold("gone", held, now - holds.HOLD_SECONDS - 1))
    holds.write(layout, 0, holds.Hold("alive", held, now))
    assert holds.held(layout, 0, now) == {held}
    assert layout.store.names(layout.holds(0)) == ["alive.json"]
    holds.release(layout, 0, "alive")
    owner.go_on(KEEP)
    assert layout.snapshot(0, held) not in snapshots.newest_first(layout, 0)


def test_prune_keeps_held_snapshots_and_their_runs(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    owner = Busy(layout)
    owner.go_on(1)
    held = snapshots.read(layout, snapshots.newest_first(layout, 0)[0])
    holds.write(layout, 0, holds.Hold("copy", held.head.seq, time.time()))
    owner.go_on(KEEP + 2)
    names = snapshots.newest_first(layout, 0)
    assert len(names) == KEEP + 1 and names[-1] == layout.snapshot(0, held.head.seq)
    restored = Replica(layout, 0)
    for table in snapshots.tables(layout, held):  # every run of the held snapshot is still there
        restored.state.apply_table(table)
    restored.head = held.head
    restored.catch_up()
    assert restored.head == owner.head, "the changelog and manifests after the held snapshot stayed"


class Unlisted(FileStore):
    """A store whose listing misses the snapshots while `hidden` (as a lagging listing, or a store
    restored from a backup without them, shows it)."""

    hidden = False

    def names(self, folder: str) -> list[str]:
        return [] if self.hidden and folder.startswith("snapshots/") else super().names(folder)


def test_a_copy_whose_history_is_gone_starts_over_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("streamapp.executor.state.replica.FLOOR_CHECK_SECONDS", 0.0)
    layout = StateLayout(tmp_path)
    owner = Busy(layout)
    view = Unlisted(tmp_path)
    copy = Replica(StateLayout(view), 0, member="copy")
    copy.load_snapshot()
    copy.catch_up()  # caught up: it holds nothing, and the owner prunes past it
    owner.go_on(KEEP + 1)
    view.hidden = True
    with pytest.raises(HistoryGone):
        copy.catch_up()
    assert copy.head == Head() and len(copy.state) == 0, "nothing half-restored is kept"
    view.hidden = False
    copy.catch_up()
    assert copy.head == owner.head
    assert dict(copy.state.items()) == dict(rebuild(layout, 0).state.items())


def test_a_copy_with_local_state_whose_history_is_gone_leaves_no_checkpoint_beside_its_emptied_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("streamapp.executor.state.replica.FLOOR_CHECK_SECONDS", 0.0)
    layout = StateLayout(tmp_path / "shared")
    owner = Busy(layout)
    view = Unlisted(tmp_path / "shared")
    local = LocalState(tmp_path / "local", "lmdb")
    copy = Replica(StateLayout(view), 0, local=local, member="copy")
    assert not copy.resume()
    copy.load_snapshot()
    copy.catch_up()
    copy.checkpoint()
    assert (local.directory(0) / CHECKPOINT).exists()
    changelog.delete_mark(layout, 0, "copy")  # its mark expired: the owner prunes past the checkpoint
    owner.go_on(KEEP + 1)
    view.hidden = True
    with pytest.raises(HistoryGone):
        copy.catch_up()
    assert not (local.directory(0) / CHECKPOINT).exists(), "a checkpoint would name rows no longer there"
    copy.close()
    view.hidden = False
    again = Replica(StateLayout(view), 0, local=local, member="copy")
    assert not again.resume()
    again.load_snapshot()
    again.catch_up()
    assert dict(again.state.items()) == dict(rebuild(layout, 0).state.items())
    again.close()
