"""Partitioned input logs: the `Source` interface and the file-based log that needs no external service.

A source exposes, per partition, an end offset and a way to read offsets `[start, end)` as a Spark
DataFrame with the record columns `offset`, `timestamp`, `key`, `value` (Kafka's shape, so a Kafka source
built on Spark's Kafka batch source with `assign` plus explicit `startingOffsets`/`endingOffsets` fits the
same interface).

The file log stores partition `P` under `<log>/p=<P>/` as Parquet segment files named
`<first offset>-<next offset>.parquet`. Appends publish whole segments by atomic rename, so readers see
a prefix of the log and never a torn segment; each partition has a single appender (the generator).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from streamapp.executor.state import storage

RECORD_SCHEMA = pa.schema(
    [
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.string()),
        ("value", pa.string()),
    ]
)
SPARK_SCHEMA = "offset BIGINT, timestamp TIMESTAMP, key STRING, value STRING"
FOLDER_COLUMN = "p"
"""A partition's folder is `p=<P>`, which a Spark scan of several partitions reads as a column."""
IN_PROCESS_READ_RECORDS = 10_000
"""The longest span of the file log read by this process rather than by a Spark scan. A Spark scan of
Parquet pays, in the JVM, a Hadoop configuration broadcast per file set and a code generation per
offset range (the range's bounds are compiled into the filter): most of a small batch's cost. Measured
(bench/results/fileread.md, rounds of three batches): JVM CPU 0.33 s in process against 0.74 s scanned
at 10 records a batch, 0.34 against 0.44 s at 10,000; from 30,000 on the scan takes less wall time
(0.26 s against 0.32 s; at 100,000 0.39 s against 0.86 s)."""


class Source(Protocol):
    """A partitioned, offset-addressed input."""

    def end_offset(self, partition: int) -> int:
        """The offset the next record of `partition` will get (records below it are readable)."""
        ...

    def read(self, spark: SparkSession, partition: int, start: int, end: int) -> DataFrame:
        """Records with `start <= offset < end` as a DataFrame of the record columns."""
        ...


@runtime_checkable
class ReadsInProcess(Protocol):
    """A source that can hand a span's records to this process as Arrow, without Spark."""

    def read_in_process(self, partition: int, start: int, end: int) -> pa.Table | None:
        """The records with `start <= offset < end` read here, or None when a Spark scan reads this
        span better (then `read` scans it)."""
        ...


@runtime_checkable
class ReadsKeysAhead(Protocol):
    """A source that can say which keys a span holds before Spark reads it (`Task.read_ahead`)."""

    def keys_in_process(self, partition: int, start: int, end: int) -> list[str]:
        """The distinct keys of the records with `start <= offset < end`, read here."""
        ...


@runtime_checkable
class ScansSpans(Protocol):
    """A source that can read several partitions' spans in one Spark scan."""

    def scan(self, spark: SparkSession, spans: Mapping[int, tuple[int, int]]) -> DataFrame:
        """The records of every partition's `(start, end)` span, in one DataFrame of the record columns."""
        ...


@runtime_checkable
class ReportsPosition(Protocol):
    """A source with a place of its own for consumed positions (Kafka: a consumer group), which lag
    tools read. Never read back: the commit manifests are the position."""

    def report_position(self, partition: int, offset: int) -> None:
        """The owner committed `partition`'s input up to `offset` (exclusive)."""
        ...


@dataclass(frozen=True)
class Segment:
    """One published file of the log, holding offsets `[first, next)`."""

    first: int
    next: int
    path: Path


def parse_segment(path: Path) -> Segment:
    first, _, rest = path.name.removesuffix(".parquet").partition("-")
    return Segment(first=int(first), next=int(rest), path=path)


def segment_name(first: int, next_offset: int) -> str:
    return f"{first:020d}-{next_offset:020d}.parquet"


def overlapping(segments: Sequence[Segment], start: int, end: int) -> list[Segment]:
    """Segments holding any offset of `[start, end)`; pure."""
    return [s for s in segments if s.first < end and s.next > start]


@dataclass(frozen=True)
class FileLog:
    """The file-based partitioned log (see the module docstring)."""

    root: Path

    def directory(self, partition: int) -> Path:
        return self.root / f"{FOLDER_COLUMN}={partition}"

    def segments(self, partition: int) -> list[Segment]:
        files = storage.visible_files(self.directory(partition), ".parquet")
        return sorted((parse_segment(path) for path in files), key=lambda s: s.first)

    def end_offset(self, partition: int) -> int:
        segments = self.segments(partition)
        return segments[-1].next if segments else 0

    def read(self, spark: SparkSession, partition: int, start: int, end: int) -> DataFrame:
        """A span of up to `IN_PROCESS_READ_RECORDS` is read here and handed to Spark as Arrow; a
        longer one is scanned by Spark from the segment files."""
        records = self.read_in_process(partition, start, end)
        if records is not None:
            return arrow_frame(spark, records)
        segments = overlapping(self.segments(partition), start, end)
        if not segments:
            return arrow_frame(spark, RECORD_SCHEMA.empty_table())
        frame = spark.read.schema(SPARK_SCHEMA).parquet(*(str(s.path) for s in segments))
        return frame.where((frame["offset"] >= start) & (frame["offset"] < end))

    def scan(self, spark: SparkSession, spans: Mapping[int, tuple[int, int]]) -> DataFrame:
        """`ScansSpans`: one scan of the spans' segment files, each row kept when its offset is in its
        own partition's span (the partition read from the `p=<P>` folder, then dropped): one file
        listing, plan and code generation for all of them, where a scan per partition pays each again."""
        files = [
            str(segment.path)
            for partition, (start, end) in sorted(spans.items())
            for segment in overlapping(self.segments(partition), start, end)
        ]
        if not files:
            return arrow_frame(spark, RECORD_SCHEMA.empty_table())
        frame = (
            spark.read.schema(f"{SPARK_SCHEMA}, {FOLDER_COLUMN} INT")
            .option("basePath", str(self.root))
            .parquet(*files)
        )
        kept = " OR ".join(  # one expression, parsed once: columns built one by one cost a call each
            f"({FOLDER_COLUMN} = {int(partition)} AND offset >= {int(start)} AND offset < {int(end)})"
            for partition, (start, end) in sorted(spans.items())
        )
        return frame.where(kept).drop(FOLDER_COLUMN)

    def read_in_process(self, partition: int, start: int, end: int) -> pa.Table | None:
        """`ReadsInProcess`: a span of up to `IN_PROCESS_READ_RECORDS`, as `read` reads it."""
        if end - start > IN_PROCESS_READ_RECORDS:
            return None
        return _records(overlapping(self.segments(partition), start, end), start, end)

    def keys_in_process(self, partition: int, start: int, end: int) -> list[str]:
        """`ReadsKeysAhead`: only the key and offset columns of the span's segments are read."""
        kept = _records(overlapping(self.segments(partition), start, end), start, end, ["offset", "key"])
        return list(pc.unique(kept["key"]).to_pylist())

    def read_arrow(self, partition: int, start: int = 0, end: int | None = None) -> pa.Table:
        """The same records without Spark (for references, tests and tools)."""
        stop = self.end_offset(partition) if end is None else end
        return _records(overlapping(self.segments(partition), start, stop), start, stop)

    def append(self, partition: int, records: pa.Table) -> int:
        """Append records (columns `timestamp`, `key`, `value`) as one segment; returns the new end offset."""
        first = self.end_offset(partition)
        count: int = records.num_rows
        if count == 0:
            return first
        offsets = pa.array(range(first, first + count), type=pa.int64())
        table = pa.table(
            [offsets, records["timestamp"], records["key"], records["value"]], schema=RECORD_SCHEMA
        )
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        path = self.directory(partition) / segment_name(first, first + count)
        storage.write_atomic(path, sink.getvalue().to_pybytes())
        return first + count


def arrow_frame(spark: SparkSession, records: pa.Table) -> DataFrame:
    """Records read in this process as a DataFrame of the record columns (an empty one keeps them too)."""
    if records.num_rows == 0:
        return spark.createDataFrame([], SPARK_SCHEMA)
    return spark.createDataFrame(records)


def _records(segments: Sequence[Segment], start: int, end: int, columns: list[str] | None = None) -> pa.Table:
    """The records of `segments` with `start <= offset < end` (only `columns` of them, which must
    include `offset`, when given), read in this process."""
    if not segments:
        schema = RECORD_SCHEMA if columns is None else pa.schema([RECORD_SCHEMA.field(c) for c in columns])
        return schema.empty_table()
    table = pa.concat_tables([pq.read_table(s.path, columns=columns) for s in segments])
    return table.filter(pc.and_(pc.greater_equal(table["offset"], start), pc.less(table["offset"], end)))
