"""Sorted runs: the immutable files a snapshot is made of (`snapshots`, format 2).

A run holds key/value rows sorted by key (bytewise, as Arrow compares strings), each key once; a null
value is a tombstone (the key was deleted after an older run set it). A snapshot lists runs oldest
first, newer ones overriding older, so a snapshot after a few batches is the previous snapshot's runs
plus one run of what changed (incremental: the unchanged runs are shared, not uploaded again), and
runs are merged now and then to keep their number small (`tiers`).

Everything here streams: a run is an Arrow IPC stream (LZ4-compressed batches of `BATCH_ROWS`), written
through `BlobStore.writer` and read through `BlobStore.reader` front to back, and a merge holds one
batch per run at a time, so memory never grows with the state. Each run's SHA-256, byte size and row
count are recorded by the snapshots that list it and checked when it is read (`CorruptRun`).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streamapp.executor.state.blobstore import BlobStore, Readable, Writable

SUFFIX = ".arrows"
BATCH_ROWS = 65_536
"""Rows per record batch of a run: what a reader or a merge holds per run at a time."""
_READ_BYTES = 1 << 20
_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


class CorruptRun(ValueError):
    """A run's bytes are not what the snapshot listing it recorded (size, checksum or rows)."""


@dataclass(frozen=True)
class Run:
    """One run as a snapshot lists it."""

    name: str
    rows: int
    size: int
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "rows": self.rows, "bytes": self.size, "sha256": self.sha256}

    @staticmethod
    def from_json(body: dict[str, Any]) -> Run:
        return Run(str(body["name"]), int(body["rows"]), int(body["bytes"]), str(body["sha256"]))


def unique_name(folder: str, seq: int) -> str:
    """A new run's name: the snapshot sequence it was written for, and an id no other writer uses."""
    return f"{folder}/{seq:012d}-{uuid.uuid4().hex[:12]}{SUFFIX}"


def schema(value_type: pa.DataType) -> pa.Schema:
    return pa.schema([("key", pa.string()), ("value", value_type)])


class _HashingWriter:
    """Counts and hashes what passes to the store's stream (what pyarrow needs of a Python sink)."""

    closed = False

    def __init__(self, inner: Writable) -> None:
        self.inner = inner
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> int:
        chunk = bytes(data)
        self.digest.update(chunk)
        self.size += len(chunk)
        self.inner.write(chunk)
        return len(chunk)

    def flush(self) -> None:
        """Nothing buffered here; the store's stream publishes at the end of its block."""

    def tell(self) -> int:
        return self.size


class _HashingReader:
    """Counts and hashes what is read from the store's stream."""

    closed = False

    def __init__(self, inner: Readable) -> None:
        self.inner = inner
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.inner.read(size)
        self.digest.update(chunk)
        self.size += len(chunk)
        return chunk

    def drain(self) -> None:
        """Read to the end, so the checksum covers every byte."""
        while self.read(_READ_BYTES):
            pass


def write(store: BlobStore, name: str, value_type: pa.DataType, tables: Iterable[pa.Table]) -> Run:
    """Stream sorted, de-duplicated `tables` (in key order across them) into a new run `name`."""
    rows = 0
    with store.writer(name) as stream:
        sink = _HashingWriter(stream)
        with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), schema(value_type), options=_OPTIONS) as out:
            for table in tables:
                if table.num_rows:
                    out.write_table(table.cast(schema(value_type)), max_chunksize=BATCH_ROWS)
                    rows += table.num_rows
    return Run(name=name, rows=rows, size=sink.size, sha256=sink.digest.hexdigest())


def read(store: BlobStore, run: Run) -> Iterator[pa.RecordBatch]:
    """The run's batches in key order; raises `CorruptRun` at the end when its bytes or rows are not
    what `run` records (the caller discards what it applied), FileNotFoundError when it is gone."""
    rows = 0
    with store.reader(run.name) as stream:
        source = _HashingReader(stream)
        try:
            with pa.ipc.open_stream(pa.PythonFile(source, mode="r")) as batches:
                for batch in batches:
                    rows += batch.num_rows
                    yield batch
            source.drain()
        except (pa.ArrowInvalid, OSError) as error:  # bytes Arrow cannot decode: damaged
            raise CorruptRun(f"{store.describe()}/{run.name}: {error}") from error
    found = (source.size, source.digest.hexdigest(), rows)
    if found != (run.size, run.sha256, run.rows):
        raise CorruptRun(
            f"{store.describe()}/{run.name}: {source.size} bytes, sha256 {found[1]}, {rows} rows; "
            f"the snapshot recorded {run.size} bytes, sha256 {run.sha256}, {run.rows} rows"
        )


def newest_per_key(tables: Sequence[pa.Table], drop_tombstones: bool) -> pa.Table:
    """`tables` (oldest first) as one table sorted by key with each key's newest row; tombstones are
    dropped when nothing older remains for them to hide (`drop_tombstones`)."""
    aged = [
        table.select(["key", "value"]).append_column(
            "age", pa.repeat(pa.scalar(age, pa.int32()), table.num_rows)
        )
        for age, table in enumerate(tables)
    ]
    if not aged:
        return pa.table({"key": pa.array([], pa.string()), "value": pa.array([], pa.int64())})
    rows = pa.concat_tables(aged, promote_options="permissive")
    rows = rows.take(pc.sort_indices(rows, sort_keys=[("key", "ascending"), ("age", "descending")]))
    keys = rows.column("key")
    if rows.num_rows > 1:
        changed = pc.not_equal(keys.slice(1), keys.slice(0, rows.num_rows - 1))
        first = pa.concat_arrays([pa.array([True]), *changed.chunks])
        rows = rows.filter(first)
    if drop_tombstones:
        rows = rows.filter(pc.is_valid(rows.column("value")))
    return rows.drop_columns(["age"])


def merge(store: BlobStore, runs: Sequence[Run], name: str, value_type: pa.DataType, bottom: bool) -> Run:
    """Merge `runs` (oldest first) into one new run `name`, a batch per run in memory at a time; `bottom`
    when they include the snapshot's oldest run, so tombstones have nothing left to hide."""
    return write(store, name, value_type, _merged(store, runs, bottom))


def _merged(store: BlobStore, runs: Sequence[Run], bottom: bool) -> Iterator[pa.Table]:
    """Key ranges of the merged output, in order: each step takes, from every run, its rows up to the
    smallest last key among the runs' current batches, so every row with a key in the range is in hand."""
    readers = [read(store, run) for run in runs]
    pending: list[pa.Table | None] = [None] * len(runs)
    while True:
        for index, reader in enumerate(readers):
            while pending[index] is None or pending[index].num_rows == 0:  # type: ignore[union-attr]
                batch = next(reader, None)
                if batch is None:
                    pending[index] = None
                    break
                pending[index] = pa.Table.from_batches([batch])
        live = [(index, table) for index, table in enumerate(pending) if table is not None and table.num_rows]
        if not live:
            return
        bound = min(str(table.column("key")[-1].as_py()) for _, table in live)
        taken: list[pa.Table] = []
        for index, table in live:
            upto = int(pc.sum(pc.less_equal(table.column("key"), pa.scalar(bound, pa.string()))).as_py() or 0)
            taken.append(table.slice(0, upto))
            pending[index] = table.slice(upto)
        yield newest_per_key(taken, drop_tombstones=bottom)
