"""The local keyed store of one partition, and the in-memory implementation of it.

A store holds the current value per key of one partition on one member. It never decides durability —
the shared changelog and snapshots do — but it can persist itself on the member's volume so that a
restarted member replays only what was committed since (see `localstate`). Two implementations share
this interface, chosen per app (`spec.pipeline.localStore`):

* `MemoryStore` (this module): a Python dict, persisted as one Parquet file at each local checkpoint.
  Fastest per batch; the partition's state must fit in the executor's memory.
* `LmdbStore` (`lmdbstore`): LMDB on the member's volume, for state larger than memory.

The measurements behind the choice are in `bench/results/localstores.md`.

A row whose value is null is a tombstone: applying it deletes the key (how expired windows leave the
state of every copy, through the changelog).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from streamapp.executor.state import storage

VALUE_TYPES: Mapping[str, pa.DataType] = {"long": pa.int64(), "double": pa.float64(), "string": pa.string()}
MEMORY_FILE = "memory.parquet"
SLICE_ROWS = 2_000
"""Rows converted between Arrow and Python between two offers of the interpreter lock (`slices`)."""


def arrow_type(value_type: str) -> pa.DataType:
    """The Arrow type of a declared value type (`long`, `double` or `string`)."""
    try:
        return VALUE_TYPES[value_type]
    except KeyError:
        raise ValueError(f"unknown value type {value_type!r}: use one of {', '.join(VALUE_TYPES)}") from None


def rows_table(rows: Mapping[str, Any], value_type: str) -> pa.Table:
    """Key/value rows as an Arrow table (the format of segments, snapshots and outputs)."""
    return pa.table(
        {
            "key": pa.array(list(rows.keys()), type=pa.string()),
            "value": pa.array(list(rows.values()), type=arrow_type(value_type)),
        }
    )


def slices(table: pa.Table) -> Iterator[pa.RecordBatch]:
    """`table` in slices of `SLICE_ROWS` rows, offering the interpreter lock to other threads after each.

    Why: restores run on the copy lane, a thread beside the batch lane, and converting rows between
    Arrow and Python holds the interpreter lock for as long as one call lasts. Every Spark call of the
    batch lane then waits for the lock at each return, so a round slows down by many times beside a
    thread converting large chunks (4-13x, measured with 50,000-row chunks); a few thousand rows at a
    time with a yield between them leave the batch lane nearly unhindered
    (`bench/results/dataplane.md`, "beside a warmup's restore").
    """
    for piece in table.to_batches(max_chunksize=SLICE_ROWS):
        yield piece
        time.sleep(0)


def items_table(items: Iterable[tuple[str, Any]], value_type: str) -> pa.Table:
    """Key/value pairs as an Arrow table, built `SLICE_ROWS` at a time with a yield between (`slices`)."""
    schema = pa.schema([("key", pa.string()), ("value", arrow_type(value_type))])
    pairs = iter(items)
    pieces = []
    while chunk := list(islice(pairs, SLICE_ROWS)):
        keys, values = zip(*chunk, strict=True)
        pieces.append(
            pa.record_batch(
                [pa.array(keys, pa.string()), pa.array(values, schema.field(1).type)], schema=schema
            )
        )
        time.sleep(0)
    return pa.Table.from_batches(pieces, schema)


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as the Parquet bytes every state file uses."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="lz4")
    return bytes(sink.getvalue().to_pybytes())


class KeyedStore(Protocol):
    """What the data plane needs of a partition's local store."""

    reads_ahead: bool
    """Whether a batch's keys are worth looking up before its updates are known (`Task.read_ahead`)."""

    def __len__(self) -> int: ...

    def get(self, key: str) -> Any:
        """The key's value, None when absent."""

    def lookup(self, keys: Sequence[str]) -> Mapping[str, Any]:
        """What a batch's fold reads (`merge.fold`): the value of every key of `keys` (None or left out
        when absent), read however this store reads many keys fastest."""

    def items(self) -> Iterator[tuple[str, Any]]: ...

    def upsert(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        """Set each key to its value; a None value deletes the key."""

    def apply_table(self, table: pa.Table) -> int:
        """Apply a segment or snapshot of `key`/`value` rows; returns the rows applied."""

    def key_source(self) -> Callable[[], Iterator[str]]:
        """The keys, to be read on another thread while this store changes (an expiry sweep beside
        the batches): whatever must be taken now is taken here."""

    def to_table(self, value_type: str) -> pa.Table: ...

    def clear(self) -> None:
        """Forget everything (before a full restore replaces the state)."""

    def persister(self) -> Callable[[], None]:
        """What makes the contents as they are now durable on the member's volume (before a checkpoint
        names them). Called on the batch lane, it takes only what cannot wait; the returned call does
        the slow part on another thread while this store changes (`Replica.checkpoint`)."""

    def close(self) -> None: ...


class MemoryStore:
    """A dict; `persister` writes it to `<directory>/memory.parquet` when it has a directory."""

    reads_ahead = False

    def __init__(self, directory: Path | None = None, value_type: str = "long") -> None:
        self.values: dict[str, Any] = {}
        self.directory = directory
        self.value_type = value_type

    @staticmethod
    def load(directory: Path, value_type: str) -> MemoryStore:
        """The store a previous `persister` left in `directory` (empty when there is none).

        A file that cannot be read raises: the caller treats the local state as torn.
        """
        store = MemoryStore(directory, value_type)
        path = directory / MEMORY_FILE
        if path.exists():
            store.apply_table(pq.read_table(path))
        return store

    def __len__(self) -> int:
        return len(self.values)

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def lookup(self, keys: Sequence[str]) -> Mapping[str, Any]:
        """The dict itself: reading it costs no more one key at a time."""
        return self.values

    def items(self) -> Iterator[tuple[str, Any]]:
        return iter(self.values.items())

    def upsert(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        for key, value in zip(keys, values, strict=True):
            if value is None:
                self.values.pop(key, None)
            else:
                self.values[key] = value

    def apply_table(self, table: pa.Table) -> int:
        """In slices that yield the interpreter lock (`slices`), so a restore on the copy lane does not
        stall the batch lane."""
        for chunk in slices(table):
            keys = chunk.column("key").to_pylist()
            values = chunk.column("value")
            if values.null_count:
                self.upsert(keys, values.to_pylist())
            else:
                self.values.update(zip(keys, values.to_pylist(), strict=True))
        return int(table.num_rows)

    def to_table(self, value_type: str) -> pa.Table:
        return items_table(self.values.items(), value_type)

    def key_source(self) -> Callable[[], Iterator[str]]:
        """A copy of the keys now (one C-level pass); the sweep iterates it later."""
        keys = list(self.values)
        return lambda: iter(keys)

    def clear(self) -> None:
        self.values = {}

    def persister(self) -> Callable[[], None]:
        """A shallow copy of the dict now (values are immutable scalars); encoding and writing it come
        later."""
        directory, frozen, value_type = self.directory, dict(self.values), self.value_type

        def persist() -> None:
            if directory is not None:
                table = items_table(frozen.items(), value_type)
                storage.write_atomic(directory / MEMORY_FILE, parquet_bytes(table))

        return persist

    def close(self) -> None:
        """Nothing to release: the dict goes with the object."""
