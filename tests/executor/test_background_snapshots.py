"""Snapshots run beside the batches: a snapshot held at its upload does not hold up any round."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from dataplane_checks import Stores, check_partition, executor_for, generated_log
from pyspark.sql import SparkSession

from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.state import snapshots
from streamapp.executor.state.blobstore import FileStore
from streamapp.executor.state.layout import StateLayout


class HeldSnapshots(FileStore):
    """A file store whose snapshot uploads wait until `release` is set: a very slow store, for as long
    as the test wants."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.release = threading.Event()
        self.waiting = threading.Event()

    held_prefix = "snapshots/"

    def _held(self, name: str) -> None:
        if name.startswith(self.held_prefix):
            self.waiting.set()
            assert self.release.wait(120), "the test never released the snapshot"

    def put(self, name: str, data: bytes) -> None:
        self._held(name)
        super().put(name, data)

    def create(self, name: str, data: bytes) -> bool:
        self._held(name)
        return super().create(name, data)


def tasks_snapshotting_every_two_batches(
    tmp_path: Path, partitions: int = 2
) -> tuple[FileLog, HeldSnapshots, Executor]:
    """An executor owning every task of a generated log, on a store that holds snapshot uploads."""
    log = generated_log(tmp_path / "log", partitions=partitions, count=1_200 * partitions, keys=300, seed=5)
    state = HeldSnapshots(tmp_path / "state")
    stores = Stores(state, FileStore(tmp_path / "outputs"))
    executor = executor_for(stores, log, "a", max_batch_records=100, snapshot_every=2)
    executor.apply(Target(active=dict.fromkeys(range(partitions), 1)))
    return log, state, executor


@pytest.mark.spark
def test_rounds_go_on_while_a_snapshot_is_held_at_its_upload(spark: SparkSession, tmp_path: Path) -> None:
    del spark
    log, state, executor = tasks_snapshotting_every_two_batches(tmp_path)
    layout = StateLayout(state)
    while not state.waiting.is_set():  # rounds until the first snapshot (due after 2 batches) is held
        assert executor.step() > 0
    held = {p: task.head.seq for p, task in executor.tasks.items()}
    for _ in range(6):
        assert executor.step() > 0
    after = {p: task.head.seq for p, task in executor.tasks.items()}
    assert all(after[p] >= held[p] + 6 for p in held), (held, after)
    assert snapshots.newest_first(layout, 0) == [], "the held snapshot is not published yet"
    assert all(task.snapshotting is not None for task in executor.tasks.values()), "one at a time"
    state.release.set()
    executor.run_until_idle()
    for partition in (0, 1):
        assert snapshots.newest_first(layout, partition), "published once released"
        check_partition(layout, tmp_path / "outputs", log, partition)


@pytest.mark.spark
def test_a_task_demoted_here_drops_its_queued_snapshot(spark: SparkSession, tmp_path: Path) -> None:
    """The background pool is busy with two tasks' snapshots; the third task's waits in the queue.
    Demoted to standby meanwhile, that task cancels it: its new owner snapshots, not this copy."""
    del spark
    _, state, executor = tasks_snapshotting_every_two_batches(tmp_path, partitions=3)
    tasks = executor.tasks
    while sum(task.snapshotting is not None for task in tasks.values()) < 3:
        assert executor.step() > 0
    running = {p for p, task in tasks.items() if task.snapshotting and task.snapshotting.running()}
    (queued,) = set(tasks) - running
    executor.apply(Target(active=dict.fromkeys(running, 1), standby=frozenset({queued})))
    assert tasks[queued].snapshotting is None, "the queued snapshot is cancelled"
    state.release.set()
    executor.run_until_idle()
    layout = StateLayout(state)
    assert all(snapshots.newest_first(layout, p) for p in running), "the running ones finish"
    assert snapshots.newest_first(layout, queued) == []


@pytest.mark.spark
def test_a_snapshot_held_at_its_upload_does_not_hold_another_tasks(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Background work runs on a pool: one task's long snapshot leaves room for the other's."""
    del spark
    _, state, executor = tasks_snapshotting_every_two_batches(tmp_path)
    state.held_prefix = "snapshots/p=0/"
    layout = StateLayout(state)
    while not snapshots.newest_first(layout, 1):
        assert executor.step() > 0
    assert state.waiting.is_set() and snapshots.newest_first(layout, 0) == [], "partition 0's is held"
    state.release.set()
    executor.run_until_idle()
    assert snapshots.newest_first(layout, 0), "published once released"
