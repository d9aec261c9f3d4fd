"""The data plane end to end in one process, on the shared Spark session."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest
from dataplane_checks import check_partition, executor_for, generated_log
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp.executor import pipeline as pipelines
from streamapp.executor.io import source
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.sink import FileSink
from streamapp.executor.io.source import FileLog
from streamapp.executor.merge import resolve
from streamapp.executor.pipeline import Pipeline
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.state import changelog
from streamapp.executor.state import snapshots as snapshot_files
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.replica import Replica, rebuild
from streamapp.executor.task import TaskConfig

pytestmark = pytest.mark.spark


def test_counts_are_exactly_once_across_restarts_and_snapshots(spark: SparkSession, tmp_path: Path) -> None:
    log = generated_log(tmp_path / "log", partitions=2, count=12_000, keys=300, seed=11)
    first = executor_for(tmp_path, log, "m0", max_batch_records=2_500, snapshot_every=2)
    first.apply(Target(active={0: 1, 1: 1}))
    first.run_until_idle()
    assert [s.backlog for s in first.status()] == [0, 0]

    generate(log, GenerateSpec(partitions=2, count=6_000, keys=300, seed=11))
    restarted = executor_for(tmp_path, log, "m0", max_batch_records=2_500, snapshot_every=2)
    restarted.apply(Target(active={0: 1, 1: 1}))
    restarted.run_until_idle()
    for partition in (0, 1):
        assert check_partition(StateLayout(tmp_path / "state"), tmp_path / "outputs", log, partition) >= 4
    assert list((tmp_path / "state" / "snapshots" / "p=0").iterdir())


def test_compaction_bounds_the_changelog_and_a_lagging_copy_jumps_to_a_snapshot(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lagging copy found the end of the history once already; it would look at the prune floor
    # again only after FLOOR_CHECK_SECONDS.
    monkeypatch.setattr("streamapp.executor.state.replica.FLOOR_CHECK_SECONDS", 0.0)
    log = generated_log(tmp_path / "log", partitions=1, count=12_000, keys=300, seed=12)
    layout = StateLayout(tmp_path / "state")
    owner = executor_for(tmp_path, log, "m0", max_batch_records=1_000, snapshot_every=3)
    owner.apply(Target(active={0: 1}))
    owner.step()
    owner.step()
    lagging = Replica(layout, 0)
    lagging.catch_up()
    assert lagging.head.seq == 1
    owner.run_until_idle()

    snapshots = sorted(snapshot_files.seq_of(p) for p in layout.store.names(layout.snapshots(0)))
    segments = sorted(changelog.file_seq(p) for p in layout.store.names(layout.changelog(0)))
    assert snapshots == [9, 12]
    assert segments == [10, 11, 12], "segments the oldest kept snapshot contains are deleted"
    live = sorted(snapshot_files.seq_of(p) for p in layout.store.names(layout.commits(0)))
    assert live == [9, 10, 11, 12], "manifests below the oldest kept snapshot are archived and deleted"
    lagging.catch_up()
    assert lagging.head.seq == 12
    assert lagging.state.values == rebuild(layout, 0).state.values
    check_partition(layout, tmp_path / "outputs", log, 0)


def test_windowed_sample_sums_values_per_key_and_minute(spark: SparkSession, tmp_path: Path) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=5_000, keys=40, seed=5, chunk=1_000)
    executor = executor_for(
        tmp_path, log, "m0", pipeline="streamapp.executor.samples.windowed:windowed", max_batch_records=1_700
    )
    executor.apply(Target(active={0: 1}))
    executor.run_until_idle()

    expected: dict[str, int] = defaultdict(int)
    for row in log.read_arrow(0).to_pylist():
        minute = row["timestamp"].replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%S")
        expected[f"{row['key']}@{minute}"] += int(row["value"])
    assert rebuild(StateLayout(tmp_path / "state"), 0).state.values == expected


def _latest_value(batch: DataFrame) -> DataFrame:
    return batch.select("key", "offset", F.col("value").cast("long").alias("value"))


def _run(tmp_path: Path, log: FileLog, pipeline: Pipeline) -> dict[str, object]:
    executor = Executor(
        StateLayout(tmp_path / pipeline.merge.name.replace(":", "_")),
        log,
        FileSink(tmp_path / "out"),
        pipeline,
        TaskConfig(max_batch_records=700),
    )
    executor.apply(Target(active={0: 1}))
    executor.run_until_idle()
    return rebuild(executor.context.layout, 0).state.values


def _keep_largest_even(old: object, new: object) -> object:
    assert isinstance(new, int)
    if new % 2:
        return old
    return new if old is None or (isinstance(old, int) and new > old) else old


@pytest.mark.parametrize("merge", ["sum", "min", "max", "last", "user"])
def test_every_merge_matches_a_fold_over_the_input(spark: SparkSession, tmp_path: Path, merge: str) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=3_000, keys=25, seed=9, chunk=500)
    chosen = resolve(_keep_largest_even if merge == "user" else merge)
    state = _run(tmp_path, log, Pipeline(name=merge, transform=_latest_value, merge=chosen))

    expected: dict[str, object] = {}
    for row in log.read_arrow(0).to_pylist():
        key, value = row["key"], int(row["value"])
        old = expected.get(key)
        if merge == "user":
            expected[key] = _keep_largest_even(old, value)
        elif merge == "sum":
            expected[key] = value + (old if isinstance(old, int) else 0)
        elif merge in ("min", "max"):
            expected[key] = value if old is None else {"min": min, "max": max}[merge](old, value)
        else:
            expected[key] = value
    assert state == {k: v for k, v in expected.items() if v is not None}


def test_a_transform_without_the_declared_columns_is_reported(spark: SparkSession, tmp_path: Path) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=10, keys=5)
    pipeline = pipelines.Pipeline(name="bad", transform=lambda b: b.select("key"), merge=resolve("sum"))
    with pytest.raises(ValueError, match="value"):
        _run(tmp_path, log, pipeline)


def test_the_warm_up_runs_each_kind_of_round_on_records_read_from_a_file_log_and_survives_a_transform_that_rejects_them(
    spark: SparkSession,
) -> None:
    counts = pipelines.load("streamapp.executor.samples.counts:counts")
    seen: list[list[str]] = []

    def recording(batch: DataFrame) -> DataFrame:
        seen.append(sorted(row.key for row in batch.select("key").collect()))  # read while its files exist
        return counts.transform(batch)

    assert pipelines.warm_up(Pipeline("recording", recording, counts.merge), spark)
    # one batch alone (a round of one due partition), then two in one shared job, each read from the log
    assert seen == [[f"streamapp-warm-up-{p}"] for p in (0, 0, 1)]
    seen.clear()
    assert pipelines.warm_up(Pipeline("recording", recording, counts.merge, keys_from_input=True), spark)
    # and, for keys from the input, one transform over both partitions' records, handed over and scanned
    assert seen[3:] == [["streamapp-warm-up-0", "streamapp-warm-up-1"]] * 2

    def needs_an_amount(batch: DataFrame) -> DataFrame:
        return batch.select("key", F.col("amount").alias("value"))

    assert not pipelines.warm_up(Pipeline("needs-amount", needs_an_amount, resolve("sum")), spark)


def test_the_file_log_reads_a_span_alike_in_process_and_by_a_spark_scan(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = FileLog(tmp_path)
    generate(log, GenerateSpec(partitions=1, count=21, keys=5, seed=3, chunk=7))
    spans = [(0, 21), (3, 10), (5, 19), (20, 21), (7, 14)]

    def rows(frame: DataFrame) -> list[tuple[object, ...]]:
        return sorted(tuple(row) for row in frame.select("offset", "timestamp", "key", "value").collect())

    in_process = [log.read(spark, 0, *span) for span in spans]
    assert not any(frame.inputFiles() for frame in in_process)
    monkeypatch.setattr(source, "IN_PROCESS_READ_RECORDS", 0)
    scanned = [log.read(spark, 0, *span) for span in spans]
    assert all(frame.inputFiles() for frame in scanned)
    for (start, end), mine, theirs in zip(spans, in_process, scanned, strict=True):
        assert rows(mine) == rows(theirs)
        assert [row[0] for row in rows(mine)] == list(range(start, end))
        assert mine.schema == theirs.schema


def test_one_scan_of_several_partitions_reads_each_partitions_own_span(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Offsets repeat across partitions: each row is kept for its own partition's span only."""
    log = FileLog(tmp_path)
    generate(log, GenerateSpec(partitions=3, count=90, keys=9, seed=4, chunk=10))
    spans = {0: (2, 17), 1: (0, 5), 2: (11, 12)}

    def rows(table: pa.Table) -> list[tuple[object, ...]]:
        return sorted(tuple(row.values()) for row in table.select(["offset", "key", "value"]).to_pylist())

    scanned = log.scan(spark, spans)
    assert scanned.columns == ["offset", "timestamp", "key", "value"]
    wanted = pa.concat_tables(log.read_arrow(p, *span) for p, span in spans.items())
    assert rows(scanned.toArrow()) == rows(wanted) and wanted.num_rows == 15 + 5 + 1
    assert log.scan(spark, {0: (5, 5)}).count() == 0
