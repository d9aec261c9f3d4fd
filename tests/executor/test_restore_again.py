"""A copy whose history is gone from under it restores again later; the member's active tasks go on."""

from __future__ import annotations

from pathlib import Path

import pytest
from dataplane_checks import Stores, check_partition, executor_for, generated_log
from pyspark.sql import SparkSession

from streamapp.executor.runtime import Target
from streamapp.executor.state.blobstore import FileStore
from streamapp.executor.state.layout import StateLayout

pytestmark = pytest.mark.spark


class Unlisted(FileStore):
    """The shared store as one member sees it: its listing misses the snapshots while `hidden`."""

    hidden = False

    def names(self, folder: str) -> list[str]:
        return [] if self.hidden and folder.startswith("snapshots/") else super().names(folder)


def test_a_copy_that_finds_no_snapshot_retries_while_the_members_batches_go_on(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("streamapp.executor.state.replica.FLOOR_CHECK_SECONDS", 0.0)
    monkeypatch.setattr("streamapp.executor.task.RESTORE_AGAIN_SECONDS", 0.0)
    log = generated_log(tmp_path / "log", partitions=2, count=12_000, keys=60, seed=5)
    stores = Stores.under(tmp_path)
    owner = executor_for(stores, log, "owner", max_batch_records=1_000, snapshot_every=2)
    owner.apply(Target(active={0: 1}))
    view = Unlisted(tmp_path / "state")
    member = executor_for(Stores(view, stores.outputs), log, "member", max_batch_records=1_000)
    member.apply(Target(active={1: 1}, standby=frozenset({0})))
    owner.step()
    member.step()
    member.step()  # the copy of 0 caught up with the owner's first batch; 1 processes
    owner.run_until_idle()  # the owner's snapshots prune the history past the copy's head
    view.hidden = True

    with caplog.at_level("WARNING"):
        before = {task.partition: task.applied_offset for task in member.status()}
        member.step()
        member.step()
    after = {task.partition: task.applied_offset for task in member.status()}
    assert "restoring again from the newest snapshot" in caplog.text
    assert after[1] > before[1], "the member's active task went on"
    assert after[0] < log.end_offset(0)

    view.hidden = False
    member.run_until_idle()
    done = {task.partition: task.applied_offset for task in member.status()}
    assert done == {0: log.end_offset(0), 1: log.end_offset(1)}
    for partition in (0, 1):
        check_partition(StateLayout(stores.state), stores.outputs, log, partition)
