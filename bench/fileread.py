"""Reading a batch from the file log: a Spark scan of the segment files against a read in this process
handed to Spark as Arrow, side by side on one session, at several batch sizes.

    .venv/bin/python bench/fileread.py [--write bench/results/fileread.md] [--quick]

Each round is what an executor owning three partitions runs: one batch of each, in one shared job
(`pipeline.keyed_updates_by_partition`, the count pipeline). The two ways alternate round by round on
the same input, so both see the same machine. Measured per round: wall time, and CPU time of the JVM
(from /proc, the session's gateway process) and of this Python process. `FileLog.read` picks the
in-process read up to `source.IN_PROCESS_READ_RECORDS` records a batch; this is where that figure
comes from.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

import benchreport
from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.source import IN_PROCESS_READ_RECORDS, SPARK_SCHEMA, FileLog
from streamapp.executor.spark import session

PARTITIONS = 3
SIZES = (10, 1_000, 10_000, 30_000, 100_000)
Reader = Callable[[SparkSession, FileLog, int, int, int], DataFrame]


def scanned(spark: SparkSession, log: FileLog, partition: int, start: int, end: int) -> DataFrame:
    """The batch as a Spark scan of its segment files, filtered to the offset range."""
    paths = [str(s.path) for s in log.segments(partition) if s.first < end and s.next > start]
    frame = spark.read.schema(SPARK_SCHEMA).parquet(*paths)
    return frame.where((frame["offset"] >= start) & (frame["offset"] < end))


def in_process(spark: SparkSession, log: FileLog, partition: int, start: int, end: int) -> DataFrame:
    """The batch read by pyarrow here and handed to Spark as Arrow."""
    return spark.createDataFrame(log.read_arrow(partition, start, end))


READERS: dict[str, Reader] = {"Spark scan": scanned, "in-process read": in_process}


def jvm_seconds(spark: SparkSession) -> float:
    """User+system CPU of the session's JVM so far."""
    pid = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(spark: SparkSession, size: int, rounds: int) -> dict[str, list[tuple[float, float, float]]]:
    """`rounds` rounds of each way (after one of each unmeasured), alternating, on fresh batches."""
    log = FileLog(Path(tempfile.mkdtemp(prefix="fileread-")))
    stamp = pa.array([dt.datetime.now(dt.UTC)] * size, pa.timestamp("us", tz="UTC"))
    records = pa.table(
        {"timestamp": stamp, "key": [f"k{i % 2_000}" for i in range(size)], "value": ["1"] * size}
    )
    total = 2 * (rounds + 1)
    for partition in range(PARTITIONS):
        for _ in range(total):
            log.append(partition, records)
    counts = pipelines.load("streamapp.executor.samples.counts:counts")
    seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in READERS}
    for index in range(total):
        name = list(READERS)[index % 2]
        read = READERS[name]
        jvm, python, wall = jvm_seconds(spark), time.process_time(), time.monotonic()
        frames = {p: read(spark, log, p, index * size, (index + 1) * size) for p in range(PARTITIONS)}
        pipelines.keyed_updates_by_partition(counts, frames)
        if index >= 2:
            seen[name].append(
                (time.monotonic() - wall, jvm_seconds(spark) - jvm, time.process_time() - python)
            )
    return seen


def main(argv: list[str] | None = None) -> None:
    args = benchreport.arguments(__doc__ or "", argv)
    sizes, rounds = ((10, 10_000), 3) if args.quick else (SIZES, 8)
    load = os.getloadavg()[0]
    spark = session()
    pipelines.warm_up(pipelines.load("streamapp.executor.samples.counts:counts"), spark)
    rows = []
    for size in sizes:
        seen = measure(spark, size, rounds)
        medians = {
            name: [statistics.median(r[i] for r in runs) for i in range(3)] for name, runs in seen.items()
        }
        for name, (wall, jvm, python) in medians.items():
            ratio = jvm / medians["Spark scan"][1]
            rows.append(f"| {size:,} | {name} | {wall:.3f} | {jvm:.3f} | {python:.3f} | {ratio:.2f} |")
            print(rows[-1], flush=True)
    lines = [
        "# Reading a batch from the file log: Spark scan or in-process read",
        "",
        f"Produced by `.venv/bin/python bench/fileread.py` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; load average {load:.1f} at start "
        f"and {os.getloadavg()[0]:.1f} at end. One session; a round is one batch of each of {PARTITIONS} "
        f"partitions in one shared job (the count pipeline); the two ways alternate round by round, {rounds} "
        f"measured rounds each per size. Medians per round. `FileLog.read` reads in process up to "
        f"{IN_PROCESS_READ_RECORDS:,} records a batch.",
        "",
        "| records a batch | way | wall s | JVM CPU s | Python CPU s | JVM CPU against the scan |",
        "|---:|---|---:|---:|---:|---:|",
        *rows,
    ]
    benchreport.emit(lines, args.write)


if __name__ == "__main__":
    main()
