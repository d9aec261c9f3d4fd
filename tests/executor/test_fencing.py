"""Two runtimes believe they own a partition: the older epoch's commits are rejected, nothing corrupts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataplane_checks import Stores, check_partition, executor_for, files_in, generated_log
from pyspark.sql import SparkSession

from streamapp.executor.io.sink import FileSink
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Kind, Manifest

pytestmark = pytest.mark.spark


@dataclass
class FenceDuringWrite:
    """A sink that lets the new owner fence the partition while the zombie's batch is being written."""

    inner: FileSink
    new_owner: Executor | None = None

    def write(self, partition: int, seq: int, epoch: int, rows: pa.Table) -> tuple[str, ...]:
        names = self.inner.write(partition, seq, epoch, rows)
        if self.new_owner is not None:
            self.new_owner.step()
            self.new_owner = None
        return names

    def settle(self, partition: int, decided: Mapping[int, tuple[str, ...]]) -> None:
        self.inner.settle(partition, decided)


def test_a_zombie_that_notices_the_fence_before_its_batch_stops(
    spark: SparkSession, tmp_path: Path, stores: Stores
) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=8_000, keys=100, seed=2)
    old = executor_for(stores, log, "old", max_batch_records=2_000)
    old.apply(Target(active={0: 1}))
    old.step()
    old.step()
    new = executor_for(stores, log, "new", max_batch_records=2_000)
    new.apply(Target(active={0: 2}))
    new.step()

    old.step()
    assert old.status()[0].fenced_by == 2
    new.run_until_idle()
    old.run_until_idle()
    layout = StateLayout(stores.state)
    check_partition(layout, stores.outputs, log, 0)
    epochs = [m.epoch for m in accepted_manifests(layout, 0)]
    assert epochs == sorted(epochs) and epochs[-1] == 2
    assert old.status()[0].applied_offset == log.end_offset(0)


def test_a_zombie_mid_batch_loses_the_manifest_race_to_the_fence(
    spark: SparkSession, tmp_path: Path, stores: Stores
) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=8_000, keys=100, seed=3)
    racing = FenceDuringWrite(FileSink(stores.outputs))
    old = executor_for(stores, log, "old", sink=racing, max_batch_records=2_000)
    old.apply(Target(active={0: 1}))
    old.step()
    old.step()
    new = executor_for(stores, log, "new", max_batch_records=2_000)
    new.apply(Target(active={0: 2}))
    racing.new_owner = new

    old.step()
    assert old.status()[0].fenced_by == 2
    new.run_until_idle()
    layout = StateLayout(stores.state)
    check_partition(layout, stores.outputs, log, 0)
    committed = [m for m in accepted_manifests(layout, 0) if m.kind is Kind.BATCH]
    assert files_in(stores.outputs) == len(committed), "the zombie's output was removed"


def test_a_stale_epoch_manifest_after_the_fence_counts_for_nothing(
    spark: SparkSession, tmp_path: Path, stores: Stores
) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=6_000, keys=100, seed=4)
    new = executor_for(stores, log, "new", max_batch_records=2_000)
    new.apply(Target(active={0: 2}))
    new.step()
    new.step()
    layout = StateLayout(stores.state)
    head = new.tasks[0].head
    bogus = f"{layout.changelog(0)}/bogus.parquet"
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.table({"key": ["k00000001"], "value": [10**9]}), buffer)
    layout.store.put(bogus, buffer.getvalue().to_pybytes())
    stale = Manifest(
        seq=head.next_seq,
        epoch=1,
        kind=Kind.BATCH,
        start=head.offset,
        end=head.offset + 500,
        segments=(bogus,),
    )
    manifests.create(layout, 0, stale)

    new.run_until_idle()
    check_partition(layout, stores.outputs, log, 0)
    assert new.status()[0].fenced_by is None


def test_two_incarnations_with_the_same_epoch_never_commit_a_batch_twice(
    spark: SparkSession, tmp_path: Path, stores: Stores
) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=8_000, keys=100, seed=6)
    racing = FenceDuringWrite(FileSink(stores.outputs))
    first = executor_for(stores, log, "first", sink=racing, max_batch_records=1_500)
    second = executor_for(stores, log, "second", max_batch_records=1_500)
    first.apply(Target(active={0: 1}))
    second.apply(Target(active={0: 1}))
    first.step()
    second.step()
    second.step()
    racing.new_owner = second
    first.step()
    while first.step() + second.step() > 0:
        pass

    layout = StateLayout(stores.state)
    check_partition(layout, stores.outputs, log, 0)
    batches = [m for m in accepted_manifests(layout, 0) if m.kind is Kind.BATCH]
    assert {m.owner for m in batches} == {"first", "second"}
    assert files_in(stores.outputs) == len(batches), "the output of the batch that lost was removed"
    assert first.status()[0].fenced_by is None and second.status()[0].fenced_by is None
