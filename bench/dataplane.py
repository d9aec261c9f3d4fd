"""Executor data-plane benchmark: StreamApp micro-batches vs Spark Structured Streaming (RocksDB state
store with changelog checkpointing) on the same keyed-count pipeline and the same input, restore
throughput for 1M keys, and warmup catch-up while the owner processes.

    .venv/bin/python bench/dataplane.py [--write bench/results/dataplane.md] [--quick]

Prints Markdown. Everything runs in one process on one SparkSession (the warmup runs in a child process,
as it would on another member); data lives in a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

import benchreport
from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.sink import FileSink
from streamapp.executor.io.source import SPARK_SCHEMA, FileLog
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.spark import session
from streamapp.executor.state import changelog, snapshots
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head, Kind, Manifest
from streamapp.executor.state.replica import rebuild
from streamapp.executor.state.stores import rows_table
from streamapp.executor.task import TaskConfig

COUNTS = "streamapp.executor.samples.counts:counts"
ROCKSDB_CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.streaming.numRecentProgressUpdates": "10000",
}


LOCAL_STORES_NOTE = (
    "The local stores a task keeps its state in (memory, LMDB, and RocksDB as the rejected candidate) are "
    "measured at 1M and 20M keys by `bench/localstores.py`: [localstores.md](localstores.md)."
)

WARMUP_NOTE = """\
The owner first commits 600k records in 10k batches with no snapshot; then a warmup starts in another
process (no Spark) and rebuilds the partition from the changelog, 5 manifests per step, while the owner
processes 200k more records arriving in 10k appends (100k distinct keys, so each segment holds ~10k
rows). Lag is in input records (owner's committed offset − applied offset)."""


@dataclass(frozen=True)
class Run:
    system: str
    scenario: str
    records: int
    batches: int
    seconds: float
    batch_ms: list[float]

    @property
    def p50(self) -> float:
        return statistics.median(self.batch_ms) if self.batch_ms else 0.0

    @property
    def p95(self) -> float:
        return sorted(self.batch_ms)[int(0.95 * (len(self.batch_ms) - 1))] if self.batch_ms else 0.0

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    def row(self) -> str:
        per_batch = self.records / max(1, self.batches)
        return (
            f"| {self.scenario} | {self.system} | {per_batch:,.0f} | {self.batches} | {self.p50:,.0f} "
            f"| {self.p95:,.0f} | {self.rate:,.0f} |"
        )


def repeated_row(runs: list[Run]) -> str:
    """One case run several times: the median of each run's p50 and p95 and of the throughputs, with
    the range of the p50 and of the throughput across runs."""
    first = runs[0]

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"

    per_batch = first.records / max(1, first.batches)
    return (
        f"| {first.scenario} | {first.system} | {per_batch:,.0f} | {first.batches} "
        f"| {spread([r.p50 for r in runs])} | {statistics.median([r.p95 for r in runs]):,.0f} "
        f"| {spread([r.rate for r in runs])} |"
    )


@contextmanager
def timed() -> Iterator[list[float]]:
    box: list[float] = []
    began = time.perf_counter()
    yield box
    box.append(time.perf_counter() - began)


def run_structured_streaming(
    spark: SparkSession, root: Path, log: FileLog, label: str, files_per_trigger: int
) -> Run:
    """The same count as a Structured Streaming query, `availableNow`, one segment per partition per
    trigger, RocksDB state with changelog checkpointing, updated rows appended to Parquet."""
    for key, value in ROCKSDB_CONF.items():
        spark.conf.set(key, value)
    out = str(root / "ss-out")

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.write.mode("append").parquet(out)

    stream = (
        spark.readStream.schema(SPARK_SCHEMA)
        .option("maxFilesPerTrigger", files_per_trigger)
        .parquet(str(log.root))
    )
    query = (
        stream.groupBy("key")
        .count()
        .writeStream.outputMode("update")
        .option("checkpointLocation", str(root / "ss-checkpoint"))
        .foreachBatch(write)
        .trigger(availableNow=True)
    )
    return streaming_run("Structured Streaming + RocksDB", label, query)


def streaming_run(system: str, label: str, query: DataStreamWriter) -> Run:
    """Start a Structured Streaming query that stops when its input is consumed (`availableNow`), and
    measure it from its own progress reports: the batches that read input, their trigger times."""
    began = time.perf_counter()
    handle = query.start()
    handle.awaitTermination()
    seconds = time.perf_counter() - began
    progress = [p for p in handle.recentProgress if p["numInputRows"] > 0]
    batch_ms = [float(p["durationMs"]["triggerExecution"]) for p in progress]
    records = sum(int(p["numInputRows"]) for p in progress)
    return Run(system, label, records, len(progress), seconds, batch_ms)


SIDE_BY_SIDE_NOTE = """\
One executor owns P partitions of a file log holding, per partition, R segments of exactly B records
(keys unique to their partition, 2,000 per partition); every system consumes the same log with the same
count (`groupBy(key).count()`, changed rows written out) and the same records per batch: a StreamApp
round gives each partition one batch of B records (P·B records per round), and Structured Streaming
reads P segments per trigger (`maxFilesPerTrigger` = P, so P·B records per trigger) with RocksDB state
and changelog checkpointing. Three ways of running a StreamApp round: *one transform per round* is
this version, for a pipeline whose keys come from its input (the counts sample declares
`keys_from_input`): the round's records, read in process, go to Spark as one DataFrame, the transform
and the combine run once, and each update goes to the partition whose input holds its key; *one job per
round, a transform per partition* is the version before it (each partition's batch transformed on its
own and unioned into one job; what a pipeline without the declaration still runs); *one job per
partition* is the one before that (kept for a single due partition). Every way commits each partition
on its own (its own changelog segment, outputs and manifest). Latency is per round / trigger: every
batch of the round has committed when it ends. Throughput is input records per wall second over the R
rounds (takeover excluded).

Where StreamApp stands (the run below, each case three times): ahead in every case, by the least at
32 × 10,000 (a round 460 ms against Structured Streaming's 632, medians; the ranges overlap, 459–510
against 488–632). *One transform per round* is what closed the gap at 8 and 32 partitions: the version
before spent most of a 32-partition round on Spark's driver, planning a transform and a union branch
per partition and handing each partition's records over as Arrow on its own (profiled at 32 × 10,000
with `bench/roundprofile.py` under py-spy: 25%, 18% and 12% of the round); it now plans one. A round
of more than 50,000 records is scanned by Spark from the log's files in one scan (`batches.SCAN_RECORDS`:
handing 320,000 records over as Arrow cost more than the scan and the job together), a smaller one
handed over. What is left of a 32 × 10,000 round (py-spy, one run, shares of the batch lane's
samples): the Spark job that counts the keys and returns them as Arrow 61%, defining the scan of the
32 files 20%, waiting for the 32 partitions' commits 9%."""


def partitioned_log(root: Path, partitions: int, per_batch: int, rounds: int, keys: int) -> FileLog:
    """`rounds` segments of exactly `per_batch` records per partition, written round by round (so a file
    source taking `partitions` files per trigger takes one round)."""
    log = FileLog(root / "log")
    rng = np.random.default_rng(11)
    now = datetime.now(UTC)
    for _ in range(rounds):
        for partition in range(partitions):
            picks = rng.integers(0, keys, per_batch)
            names = [f"p{partition:02d}-k{n:06d}" for n in picks.tolist()]
            stamps = pa.array([now] * per_batch, type=pa.timestamp("us", tz="UTC"))
            log.append(partition, pa.table({"timestamp": stamps, "key": names, "value": names}))
    return log


ONE_TRANSFORM = "StreamApp, one transform per round"
TRANSFORM_EACH = "StreamApp, one job per round, a transform per partition"
JOB_EACH = "StreamApp, one job per partition"
WAYS = {ONE_TRANSFORM: (True, True), TRANSFORM_EACH: (True, False), JOB_EACH: (False, False)}
"""How StreamApp runs a round: (one Spark job for all partitions, one transform over all their
records). The counts sample declares `keys_from_input`, so a round of several partitions read in
process takes the first way; the others are the data plane before it, kept to compare."""


def run_rounds(root: Path, log: FileLog, partitions: int, per_batch: int, way: str = ONE_TRANSFORM) -> Run:
    """All partitions active on one executor; one timed `step` (a round of batches) at a time."""
    shared, one_transform = WAYS[way]
    tag = list(WAYS).index(way)
    executor = Executor(
        StateLayout(root / f"sa-state-{tag}"),
        log,
        FileSink(root / f"sa-out-{tag}"),
        replace(pipelines.load(COUNTS), keys_from_input=one_transform),
        TaskConfig(max_batch_records=per_batch, snapshot_every=20, shared_batches=shared),
    )
    executor.apply(Target(active=dict.fromkeys(range(partitions), 1)))
    executor.step()  # takes every partition over; nothing is due yet
    round_ms: list[float] = []
    records = 0
    began = time.perf_counter()
    while True:
        start = time.perf_counter()
        done = executor.step()
        if done == 0:
            break
        round_ms.append(1000 * (time.perf_counter() - start))
        records += done
    seconds = time.perf_counter() - began
    return Run(way, f"{partitions} × {per_batch:,}", records, len(round_ms), seconds, round_ms)


def side_by_side(spark: SparkSession, root: Path, rounds: int, sizes: list[int], runs: int) -> list[str]:
    """Every case `runs` times, the systems taking turns within each repetition (so a slow stretch of
    the shared machine falls on all of them), each repetition on fresh state and output directories."""
    rows = []
    for per_batch in sizes:
        for partitions in (1, 8, 32):
            log = partitioned_log(
                root / f"side-{partitions}-{per_batch}", partitions, per_batch, rounds, 2_000
            )
            label = f"{partitions} × {per_batch:,}"
            found: dict[str, list[Run]] = {}
            for repetition in range(runs):
                case = root / f"side-{partitions}-{per_batch}" / f"run-{repetition}"
                ways = list(WAYS) if partitions > 1 else [ONE_TRANSFORM]  # one partition: one way
                systems = [run_rounds(case, log, partitions, per_batch, way) for way in ways]
                systems.append(run_structured_streaming(spark, case, log, label, partitions))
                for run in systems:
                    found.setdefault(run.system, []).append(run)
            rows += [repeated_row(found[system]) for system in found]
    return rows


BESIDE_NOTE = """\
One executor owns 8 partitions (8 × 1,000 records per round, one job per round as above) and runs R
rounds three ways: alone; while a warmup of a ninth partition restores {keys} keys (a snapshot plus 10
changelog segments) on the copy lane beside the batches (`Executor.run`); and with the copy work on the
batches' own thread, one after the other, as every task ran before the copy lane (the warmup's restore
is then part of a round). *rounds during the restore* counts the rounds that started before the warmup
had applied its whole history. The copy lane is a thread, so the restore converts rows between Arrow and
Python 2,000 at a time and offers the interpreter lock to the batch lane after each slice
(`state.slices`): with 50,000-row chunks the slowest round beside a restore lasted as long as the whole
restore (3,305 ms beside a 3.31 s restore in the previous version of this file). What remains is the
machine's two cores: while the restore runs it takes one of them from Spark, and *slowest round* shows
that cost."""


def beside_a_restore(root: Path, rounds: int, keys: int) -> list[str]:
    """Round latency of 8 active partitions alone, beside a warmup's restore, and with the restore on
    the same thread (the data plane before the copy lane)."""
    log = partitioned_log(root / "beside", 9, 1_000, 3 * rounds, 2_000)
    active = {partition: 1 for partition in range(1, 9)}
    rows = []
    for label, warmup, lane in (
        ("alone", False, True),
        ("beside a warmup's restore (copy lane)", True, True),
        ("restore on the batches' thread (before)", True, False),
    ):
        case = root / f"beside-{warmup}-{lane}"
        layout = StateLayout(case / "state")
        if warmup:
            write_history(layout, keys, 10, snapshot=True)
        executor = Executor(
            layout, log, FileSink(case / "out"), pipelines.load(COUNTS), TaskConfig(max_batch_records=1_000)
        )
        executor.apply(Target(active=active))
        executor.step()  # takes the 8 partitions over
        round_ms: list[float] = []
        overlapping = 0
        with executor.copy_lane(0.01) if lane else contextlib.nullcontext():
            began = time.perf_counter()
            if warmup:
                executor.apply(Target(active=active, warmup=frozenset({0})))
            restored: float | None = None if warmup else 0.0
            for _ in range(rounds):
                overlapping += restored is None
                start = time.perf_counter()
                executor.step()
                round_ms.append(1000 * (time.perf_counter() - start))
                if restored is None and executor.status()[0].applied_offset == 2 * keys:
                    restored = time.perf_counter() - began
        p50 = statistics.median(round_ms)
        p95 = sorted(round_ms)[int(0.95 * (len(round_ms) - 1))]
        took = "—" if not warmup else ("not within the run" if restored is None else f"{restored:.2f} s")
        worst = max(round_ms)
        rows.append(
            f"| {label} | {len(round_ms)} | {overlapping} | {p50:,.0f} | {p95:,.0f} | {worst:,.0f} | {took} |"
        )
    return rows


def write_history(layout: StateLayout, keys: int, segments: int, snapshot: bool) -> None:
    """A partition history of `keys` keys: optionally a snapshot of all of them, then `segments`
    changelog segments that each rewrite 1/`segments` of the keys (written through the real APIs)."""
    names = [f"k{i:08d}" for i in range(keys)]
    head = Head()
    if snapshot:
        manifests.create(layout, 0, Manifest(seq=0, epoch=1, kind=Kind.BATCH, start=0, end=keys))
        head = Head(seq=0, offset=keys, epoch=1)
        snapshots.write_table(layout, 0, head, rows_table(dict.fromkeys(names, 1), "long"), "long")
    size = keys // segments
    for index in range(segments):
        rows = dict.fromkeys(names[index * size : (index + 1) * size], index + 2)
        segment = changelog.write_segment(layout, 0, head.next_seq, 1, rows_table(rows, "long"))
        found = Manifest(
            seq=head.next_seq,
            epoch=1,
            kind=Kind.BATCH,
            start=head.offset,
            end=head.offset + size,
            segments=(segment,),
        )
        manifests.create(layout, 0, found)
        head = manifests.advance(head, found).head


def restore_rates(root: Path, keys: int) -> list[str]:
    rows = []
    for label, snapshot, segments in (
        (f"snapshot + 10 segments ({2 * keys:,} rows)", True, 10),
        ("changelog only, 10 segments", False, 10),
    ):
        layout = StateLayout(root / f"restore-{snapshot}")
        write_history(layout, keys, segments, snapshot)
        with timed() as took:
            replica = rebuild(layout, 0)
        assert len(replica.state) == keys
        applied = keys * (2 if snapshot else 1)
        rows.append(
            f"| {label} | {len(replica.state):,} | {took[0]:.2f} | {len(replica.state) / took[0]:,.0f} "
            f"| {applied / took[0]:,.0f} |"
        )
    return rows


def warmup_child(state_root: str, log_root: str, done_flag: str, results: Any) -> None:
    """A warmup on its own process (as on another member): step, record (t, applied offset, lag)."""
    executor = Executor(
        StateLayout(Path(state_root)),
        FileLog(Path(log_root)),
        FileSink(Path(state_root) / "unused"),
        pipelines.load(COUNTS),
        TaskConfig(max_apply_per_step=5),
        spark=_no_spark,
    )
    executor.apply(Target(warmup=frozenset({0})))
    began = time.perf_counter()
    first = executor.status()[0]
    timeline = [(0.0, first.applied_offset, first.lag)]
    while True:
        done = executor.step()
        status = executor.status()[0]
        timeline.append((time.perf_counter() - began, status.applied_offset, status.lag))
        if status.lag == 0 and Path(done_flag).exists():
            break
        if done == 0:
            time.sleep(0.02)
    results.put(timeline)


def _no_spark() -> SparkSession:
    raise RuntimeError("a warmup never needs Spark")


def warmup_catch_up(root: Path, history: int, live: int, keys: int) -> tuple[list[str], list[str]]:
    """The owner processes `history` records (no snapshot), then keeps processing `live` more arriving
    records while a warmup in another process rebuilds the partition from its changelog."""
    log = FileLog(root / "wlog")
    generate(log, GenerateSpec(partitions=1, count=history, keys=keys, seed=3, chunk=10_000))
    state = root / "wstate"
    owner = Executor(
        StateLayout(state),
        log,
        FileSink(root / "wout"),
        pipelines.load(COUNTS),
        TaskConfig(max_batch_records=10_000, snapshot_every=10**9),
    )
    owner.apply(Target(active={0: 1}))
    owner.run_until_idle()
    done_flag = root / "owner-done"
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=warmup_child, args=(str(state), str(log.root), str(done_flag), results))
    began = time.perf_counter()
    child.start()
    processed = 0
    while processed < live:
        generate(log, GenerateSpec(partitions=1, count=10_000, keys=keys, seed=3))
        processed += owner.step()
    owner_seconds = time.perf_counter() - began
    done_flag.touch()
    timeline: list[tuple[float, int, int]] = results.get(timeout=600)
    child.join(60)
    start_lag = timeline[0][2]
    caught = next(((t, offset) for t, offset, lag in timeline if lag <= 10_000), timeline[-1][:2])
    zero = next(((t, offset) for t, offset, lag in timeline if lag == 0), timeline[-1][:2])
    summary = [
        f"| owner (active) | processes {processed:,} new records in {owner_seconds:.1f} s "
        f"| {processed / owner_seconds:,.0f} records/s |",
        f"| warmup starts | lag {start_lag:,} | |",
        f"| warmup caught up: lag ≤ 10,000 (acceptableRecoveryLag) | after {caught[0]:.2f} s "
        f"| {caught[1] / max(caught[0], 1e-9):,.0f} input records/s applied |",
        f"| warmup current: lag 0 | after {zero[0]:.2f} s "
        f"| {zero[1] / max(zero[0], 1e-9):,.0f} input records/s applied |",
    ]
    catching = [point for point in timeline if point[0] <= caught[0]]
    later = [point for point in timeline if point[0] > caught[0]]
    samples = [*catching[:: max(1, len(catching) // 10)], *later[:: max(1, len(later) // 3)], timeline[-1]]
    lags = [f"| {t:.1f} | {offset:,} | {lag:,} |" for t, offset, lag in samples]
    return summary, lags


def resident_mib() -> float:
    """This process's resident memory."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = cpu
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    java = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, check=False
    ).stderr.splitlines()[0]
    import pyspark

    return (
        f"{os.cpu_count()} cores ({model}), {memory:.0f} GiB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, pyspark {pyspark.__version__}, {java}; "
        f"load average at start {os.getloadavg()[0]:.1f} (the machine is shared)"
    )


def main(argv: list[str] | None = None) -> int:
    args = benchreport.arguments(__doc__ or "", argv)
    scale = 10 if args.quick else 1
    rounds = 3 if args.quick else 8
    sizes = [1_000] if args.quick else [1_000, 10_000]
    runs = 1 if args.quick else 3
    restore_keys = 1_000_000 // scale
    command = " ".join(["python", "bench/dataplane.py", *(argv if argv is not None else sys.argv[1:])])
    spark = session()
    root = Path(tempfile.mkdtemp(prefix="streamapp-bench-"))
    lines = [
        "# Executor data plane benchmark",
        "",
        f"Produced by `.venv/bin/{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        f"Machine: {machine()}.",
        "",
        "The machine was shared with concurrent builds and tests, so absolute figures move by tens of percent",
        "between runs; the comparisons within one run (same data, same session, run back to back) are what",
        "this file is for.",
        "",
    ]
    try:
        lines += [
            "## Tasks side by side: 1, 8 and 32 partitions per executor vs Structured Streaming",
            "",
            '*New in this version* (replaces the earlier "keyed running count" table, whose batches were',
            "990 records (StreamApp, one partition) vs 2,000 (Structured Streaming, two): not like for like).",
            "",
            SIDE_BY_SIDE_NOTE,
            "",
            f"R = {rounds} rounds per run, each case run {runs} times (median, and in brackets the range "
            f"over the runs); load average before: {os.getloadavg()[0]:.1f}.",
            "",
            "| P × B (partitions × records per partition per batch) | system | records/batch | batches "
            "| p50 ms/batch | p95 ms/batch | records/s |",
            "|---|---|---:|---:|---:|---:|---:|",
            *side_by_side(spark, root, rounds, sizes, runs),
            "",
            f"Load average after: {os.getloadavg()[0]:.1f}.",
        ]
        lines += [
            "",
            "## Active batches beside a warmup's restore on the same executor",
            "",
            "*New in this version.*",
            "",
            BESIDE_NOTE.format(keys=f"{restore_keys:,}"),
            "",
            "| run | rounds | rounds during the restore | p50 ms/round | p95 ms/round | slowest round ms "
            "| restore done after |",
            "|---|---:|---:|---:|---:|---:|---|",
            *beside_a_restore(root, rounds, restore_keys),
            "",
            f"Load average after: {os.getloadavg()[0]:.1f}.",
        ]
        lines += [
            "",
            f"## Restore of {restore_keys:,} keys (no Spark: a snapshot's sorted runs + changelog segments → dict)",
            "",
            "| history | keys | seconds | keys/s | rows applied/s |",
            "|---|---:|---:|---:|---:|",
            *restore_rates(root, restore_keys),
            "",
            "## Warmup catch-up while the active owner processes",
            "",
            WARMUP_NOTE,
            "",
            "| what | when | rate |",
            "|---|---|---:|",
        ]
        summary, lags = warmup_catch_up(root, 600_000 // scale, 200_000 // scale, 100_000 // scale)
        lines += [*summary, "", "| warmup t (s) | applied offset | lag |", "|---:|---:|---:|", *lags]
        lines += ["", LOCAL_STORES_NOTE]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    benchreport.emit(lines, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
