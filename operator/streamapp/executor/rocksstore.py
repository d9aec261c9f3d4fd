"""A partition's local store in RocksDB on the member's volume, for state larger than memory.

Chosen over LMDB and sqlite by measurement (`bench/dataplane.py`, "Local stores"): RocksDB's LSM tree
takes a batch of random upserts as sequential writes, where a B-tree rewrites pages, and its memory use
is bounded by the block cache and memtables rather than by the number of keys.

Writes skip RocksDB's write-ahead log: the shared changelog already is one. After a crash the database
holds some prefix of the batches applied to it (memtables flush in order, a write batch is atomic), never
anything uncommitted, and never less than the last local checkpoint, because `persist` flushes before
the checkpoint is written. Replaying the changelog from the checkpoint rewrites every key changed since,
in order, so whichever prefix survived, the result is the committed state.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from streamapp.executor.state import rows_table

DIRECTORY = "rocksdb"
# Rows per write batch when applying a snapshot: bounds the memory a restore of a huge state takes.
APPLY_CHUNK = 100_000


def _options() -> Options:
    options = Options()
    options.create_if_missing(True)
    options.increase_parallelism(2)
    return options


class RocksStore:
    """RocksDB under `<directory>/rocksdb`.

    It counts its keys itself (one pass at open, then a multi-get per write batch): RocksDB's own
    estimate counts overwritten versions too and was off by 2x in the tests.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / DIRECTORY
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = Rdict(str(self.path), _options())
        self.count = sum(1 for _ in self.db.keys())  # noqa: SIM118 - an Rdict does not iterate its keys
        self._unlogged = WriteOptions()
        # A property at runtime; the stub declares a method.
        self._unlogged.disable_wal = True  # type: ignore[method-assign,assignment]

    def __len__(self) -> int:
        return self.count

    def get(self, key: str) -> Any:
        return self.db.get(key)

    def items(self) -> Iterator[tuple[str, Any]]:
        for key, value in self.db.items():
            yield str(key), value

    def upsert(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        batch = WriteBatch()
        before = cast(list[Any], self.db.get(list(keys)))  # a list of keys gets a list of values
        for key, value, old in zip(keys, values, before, strict=True):
            if value is None:
                batch.delete(key)
                self.count -= old is not None
            else:
                batch.put(key, value)
                self.count += old is None
        self.db.write(batch, self._unlogged)

    def apply_table(self, table: pa.Table) -> int:
        for chunk in table.to_batches(max_chunksize=APPLY_CHUNK):
            self.upsert(chunk.column(0).to_pylist(), chunk.column(1).to_pylist())
        return int(table.num_rows)

    def to_table(self, value_type: str) -> pa.Table:
        return rows_table(dict(self.items()), value_type)

    def clear(self) -> None:
        self.db.close()
        shutil.rmtree(self.path, ignore_errors=True)
        self.db = Rdict(str(self.path), _options())
        self.count = 0

    def persist(self) -> None:
        self.db.flush(True)

    def close(self) -> None:
        self.db.flush(True)
        self.db.close()
