"""Tasks side by side on one executor: an active task keeps committing while a warmup restores, and one
Spark job for several partitions' batches commits exactly what one job per partition does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from dataplane_checks import COUNTS, check_partition, executor_for, generated_log
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamapp import faults
from streamapp.executor import batches
from streamapp.executor import pipeline as pipelines
from streamapp.executor.batches import run_round
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.sink import FileSink, committed_outputs
from streamapp.executor.io.source import FileLog
from streamapp.executor.merge import resolve
from streamapp.executor.pipeline import Pipeline
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Kind
from streamapp.executor.state.replica import rebuild
from streamapp.executor.task import Role, Task, TaskConfig

pytestmark = pytest.mark.spark


def eventually(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def returns_within(call: Callable[[], object], seconds: float = 30.0) -> None:
    """Run `call` on another thread and assert it returns in time (a blocked call fails, not hangs)."""
    done = threading.Event()
    threading.Thread(target=lambda: (call(), done.set()), daemon=True).start()
    assert done.wait(seconds), f"{call} did not return within {seconds} s"


def test_an_active_task_keeps_committing_while_a_warmup_restores(spark: SparkSession, tmp_path: Path) -> None:
    log = FileLog(tmp_path / "log")
    more = GenerateSpec(partitions=2, count=2_000, keys=200, seed=31)
    generate(log, GenerateSpec(partitions=2, count=6_000, keys=200, seed=31))
    old = executor_for(tmp_path, log, "old", max_batch_records=500, snapshot_every=10**6)
    old.apply(Target(active={1: 1}))
    old.run_until_idle()
    history = old.status()[0].applied_offset

    restoring, finish = threading.Event(), threading.Event()

    def hold() -> None:
        restoring.set()
        finish.wait(180)

    target = Target(active={0: 1}, warmup=frozenset({1}))
    b = executor_for(tmp_path, log, "b", max_batch_records=500, max_apply_per_step=2)
    b.apply(target)
    stop = threading.Event()
    worker = threading.Thread(target=b.run, args=(stop.is_set, 0.05), daemon=True)
    layout = StateLayout(tmp_path / "state")
    with faults.on("restore.segment-applied", hold):
        worker.start()
        try:
            assert restoring.wait(120), "the warmup never started restoring"
            eventually(lambda: b.status()[0].applied_offset == log.end_offset(0), "the active caught up")
            generate(log, more)
            eventually(lambda: b.status()[0].applied_offset == log.end_offset(0), "it processed more")
            returns_within(b.status)
            returns_within(lambda: b.apply(target))
            warm = b.status()[1]
            assert warm.role is Role.WARMUP and warm.applied_offset < history, "still restoring"
            assert not finish.is_set()
            batches = [m for m in accepted_manifests(layout, 0) if m.kind is Kind.BATCH]
            assert batches[-1].end == log.end_offset(0), "the active committed batch after batch meanwhile"
            assert len(batches) >= log.end_offset(0) // 500
        finally:
            finish.set()
        eventually(lambda: b.status()[1].lag == 0, "the warmup caught up")
    stop.set()
    worker.join(60)
    assert not worker.is_alive()
    check_partition(layout, tmp_path / "outputs", log, 0)
    assert b.tasks[1].replica.state.values == rebuild(layout, 1).state.values


def latest_value(batch: DataFrame) -> DataFrame:
    """The last value per key (an order-dependent merge: the shared job must keep each partition's order)."""
    return batch.select("key", "value", "offset")


PIPELINES = {
    "count": "streamapp.executor.samples.counts:counts",
    "windowed sum": "streamapp.executor.samples.windowed:windowed",
    "last": Pipeline(name="last", transform=latest_value, merge=resolve("last"), value_type="string"),
    "user merge": Pipeline(
        name="concat",
        transform=latest_value,
        merge=resolve(lambda old, new: (old or "")[-20:] + new),
        value_type="string",
    ),
}


@pytest.mark.parametrize("partitions", [1, 2, 5, 8])
def test_one_job_for_several_partitions_computes_each_partitions_own_updates(
    spark: SparkSession, tmp_path: Path, partitions: int
) -> None:
    """The union of the partitions' frames (a tree of pairs, odd counts leaving one over at a level)
    loses no partition and mixes none: each one's updates are what its own job computes."""
    log = generated_log(
        tmp_path / "log", partitions=partitions, count=400 * partitions, keys=50, seed=partitions
    )
    counts = pipelines.load(COUNTS)
    frames = {p: log.read(spark, p, 0, log.end_offset(p)) for p in range(partitions)}
    together = pipelines.keyed_updates_by_partition(counts, frames)
    assert sorted(together) == list(range(partitions))
    for partition, frame in frames.items():
        alone = pipelines.keyed_updates(counts, frame)
        assert together[partition].sort_by("key").to_pylist() == alone.sort_by("key").to_pylist()
        assert together[partition].num_rows > 0


def committed(
    root: Path, partition: int
) -> tuple[list[tuple[int, int, int]], list[pa.Table], dict[str, object]]:
    layout = StateLayout(root / "state")
    spans = [(m.seq, m.start, m.end) for m in accepted_manifests(layout, partition)]
    outputs = [table.sort_by("key") for _, table in committed_outputs(layout, root / "outputs", partition)]
    return spans, outputs, rebuild(layout, partition).state.values


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_one_job_for_all_partitions_commits_what_one_job_each_does(
    spark: SparkSession, tmp_path: Path, name: str
) -> None:
    log = generated_log(tmp_path / "log", partitions=3, count=6_000, keys=300, seed=32)
    roots = {shared: tmp_path / ("shared" if shared else "alone") for shared in (True, False)}
    for shared, root in roots.items():
        chosen = PIPELINES[name]
        executor = Executor(
            StateLayout(root / "state"),
            log,
            FileSink(root / "outputs"),
            chosen if isinstance(chosen, Pipeline) else pipelines.load(chosen),
            TaskConfig(owner="m", max_batch_records=700, snapshot_every=3, shared_batches=shared),
        )
        executor.apply(Target(active={0: 1, 1: 1, 2: 1}))
        executor.run_until_idle()
    for partition in range(3):
        spans, outputs, state = committed(roots[True], partition)
        assert len(spans) > 3 and spans[-1][2] == log.end_offset(partition)
        assert (spans, outputs, state) == committed(roots[False], partition)
        if name == "count":
            check_partition(StateLayout(roots[True] / "state"), roots[True] / "outputs", log, partition)


@pytest.mark.parametrize(
    "case", ["keys from the input", "scanned by Spark", "a key of no input record", "a key in two partitions"]
)
def test_one_transform_over_every_partitions_records_when_the_keys_come_from_the_input(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """A pipeline declaring `keys_from_input` gets one transform over all of a round's records, and
    commits what one job per partition does; where the promise breaks (an update keyed by no input
    record, or input keys that span partitions), the round runs one transform per partition instead."""
    log = FileLog(tmp_path / "log")
    if case == "a key in two partitions":
        stamp = pa.array([datetime.now(UTC)] * 300, pa.timestamp("us", tz="UTC"))
        for partition in range(3):
            keys = [f"k{i % 40}" for i in range(300)]
            log.append(partition, pa.table({"timestamp": stamp, "key": keys, "value": keys}))
    else:
        generate(log, GenerateSpec(partitions=3, count=900, keys=120, seed=5))

    def transform(batch: DataFrame) -> DataFrame:
        if case == "a key of no input record":
            return batch.select(F.concat("key", F.lit("!")).alias("key"))
        return batch.select("key")

    per_partition: list[int] = []
    scans: list[int] = []
    unioned, scan = batches.combined_updates, FileLog.scan
    monkeypatch.setattr(batches, "combined_updates", lambda *args: per_partition.append(1) or unioned(*args))
    monkeypatch.setattr(FileLog, "scan", lambda *args: scans.append(1) or scan(*args))
    if case == "scanned by Spark":
        monkeypatch.setattr(batches, "SCAN_RECORDS", 0)
    roots = {shared: tmp_path / ("shared" if shared else "alone") for shared in (True, False)}
    for shared, root in roots.items():
        executor = Executor(
            StateLayout(root / "state"),
            log,
            FileSink(root / "outputs"),
            Pipeline(name=case, transform=transform, merge=resolve("count"), keys_from_input=True),
            TaskConfig(owner="m", max_batch_records=100, snapshot_every=3, shared_batches=shared),
        )
        executor.apply(Target(active={0: 1, 1: 1, 2: 1}))
        executor.run_until_idle()
    for partition in range(3):
        spans, outputs, state = committed(roots[True], partition)
        assert len(spans) >= 2 and spans[-1][2] == log.end_offset(partition)
        assert (spans, outputs, state) == committed(roots[False], partition)
    assert bool(per_partition) == case.startswith("a key")
    assert bool(scans) == (case == "scanned by Spark")


def test_a_task_handed_over_is_taken_over_and_processed_without_waiting_for_the_idle_polls(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A new target wakes the copy lane (the takeover) and a finished takeover the batch lane: with polls
    a minute apart, a handed-over task still commits its first batch at once."""
    log = generated_log(tmp_path / "log", partitions=1, count=1_000, keys=50, seed=41)
    old = executor_for(tmp_path, log, "old", max_batch_records=500)
    old.apply(Target(active={0: 1}))
    old.run_until_idle()
    new = executor_for(tmp_path, log, "new", max_batch_records=500)
    new.apply(Target(warmup=frozenset({0})))
    new.step()
    assert new.status()[0].lag == 0
    generate(log, GenerateSpec(partitions=1, count=200, keys=50, seed=42))
    stop = threading.Event()
    lanes = threading.Thread(target=new.run, args=(stop.is_set, 60.0), daemon=True)
    lanes.start()
    try:
        time.sleep(0.5)  # both lanes idle, each in its minute-long poll
        assert old.apply(Target()) == frozenset({0})
        new.apply(Target(active={0: 2}))
        state = StateLayout(tmp_path / "state")
        # A batch, not the takeover's fence (also the new owner's): waiting on the owner alone passed
        # at the fence, and the revocation below could then stop the batch before it ran (cold run 14).
        eventually(
            lambda: [(m.owner, m.kind) for m in accepted_manifests(state, 0)][-1:] == [("new", Kind.BATCH)],
            "the new owner commits its first batch",
            timeout=30.0,
        )
    finally:
        stop.set()
        new.apply(Target())
        lanes.join(70)
    check_partition(StateLayout(tmp_path / "state"), tmp_path / "outputs", log, 0)


def test_tasks_handed_over_together_ride_one_round(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch lane, woken by the first of two takeovers of one target, waits the moment the second
    takes to finish (here held 0.05 s longer, after the first: the copy lane takes them in turn)
    instead of leaving it a whole round behind.

    The grace is raised far above what either takeover takes, so the test checks that the lane waits
    for takeovers under way, not how fast a loaded machine runs them. A CI run with that grace still
    saw a round of the second task alone: the copy lane, looking for work, held the first task for an
    instant just as the batch lane claimed its round; lanes now look at a task before claiming it."""
    monkeypatch.setattr("streamapp.executor.runtime.TAKEOVER_GRACE_SECONDS", 30.0)
    log = generated_log(tmp_path / "log", partitions=2, count=1_000, keys=50, seed=43)
    old = executor_for(tmp_path, log, "old", max_batch_records=500)
    old.apply(Target(active={0: 1, 1: 1}))
    old.run_until_idle()
    new = executor_for(tmp_path, log, "new", max_batch_records=500)
    new.apply(Target(warmup=frozenset({0, 1})))
    new.run_until_idle()
    generate(log, GenerateSpec(partitions=2, count=200, keys=50, seed=44))
    old.run_until_idle()  # a last batch each, which the takeovers apply
    rounds: list[list[int]] = []

    def recording(context: object, tasks: list[Task]) -> int:
        rounds.append(sorted(t.partition for t in tasks))
        return run_round(context, tasks)  # type: ignore[arg-type]

    monkeypatch.setattr("streamapp.executor.runtime.run_round", recording)
    applied: list[None] = []

    def second_is_slower() -> None:
        applied.append(None)
        if len(applied) == 2:
            time.sleep(0.05)

    stop = threading.Event()
    lanes = threading.Thread(target=new.run, args=(stop.is_set, 0.05), daemon=True)
    lanes.start()
    try:
        assert old.apply(Target()) == frozenset({0, 1})
        generate(log, GenerateSpec(partitions=2, count=100, keys=50, seed=45))
        with faults.on("restore.segment-applied", second_is_slower):
            new.apply(Target(active={0: 2, 1: 2}))
            eventually(lambda: any(rounds), "the first round after the takeovers")
    finally:
        stop.set()
        new.apply(Target())
        lanes.join(30)
    assert rounds[0] == [0, 1], rounds


class MeetingSink:
    """A file sink whose writes wait (up to 5 s) for another partition's write to be in at once; `met`
    counts the writes that met one. Commits one after another never meet."""

    def __init__(self, root: Path) -> None:
        self.files = FileSink(root)
        self.meeting = threading.Barrier(2, timeout=5)
        self.met = 0

    def write(self, partition: int, seq: int, epoch: int, rows: pa.Table) -> tuple[str, ...]:
        try:
            self.meeting.wait()
            self.met += 1
        except threading.BrokenBarrierError:
            self.meeting.reset()  # a round of one partition: it goes on alone
        return self.files.write(partition, seq, epoch, rows)

    def settle(self, partition: int, decided: Mapping[int, tuple[str, ...]]) -> None:
        self.files.settle(partition, decided)


@pytest.mark.spark
def test_the_partitions_of_a_round_commit_side_by_side(spark: SparkSession, tmp_path: Path) -> None:
    """A commit is mostly waiting (the store's writes, a Kafka transaction), so a round commits its
    partitions at once rather than one after another."""
    del spark
    log = generated_log(tmp_path / "log", partitions=2, count=1_000, keys=50, seed=46)
    assert min(log.end_offset(0), log.end_offset(1)) > 250, "at least two rounds of both partitions"
    sink = MeetingSink(tmp_path / "outputs")
    executor = Executor(
        StateLayout(tmp_path / "state"),
        log,
        sink,
        pipelines.load(COUNTS),
        TaskConfig(owner="a", max_batch_records=250),
    )
    executor.apply(Target(active={0: 1, 1: 1}))
    executor.run_until_idle()
    assert sink.met >= 4, "the writes of every round of two partitions met"
    for partition in (0, 1):
        check_partition(StateLayout(tmp_path / "state"), tmp_path / "outputs", log, partition)
