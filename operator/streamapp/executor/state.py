"""The local keyed store of one partition: a Python dict, persisted as Parquet snapshots.

Chosen by measurement (`bench/dataplane.py`, "State store candidates", recorded in
`bench/results/dataplane.md`; 2-core VM shared with other builds, 1M keys of 9 characters, int64 values,
one batch = 10,000 updates):

| store | fold one batch | snapshot | restore 1M keys | memory |
|---|---:|---:|---:|---:|
| dict + Arrow/Parquet snapshot | 9 ms | 0.19 s | 0.47 s (≈2.1M keys/s) | 122 MiB |
| sqlite, WAL, `INSERT … ON CONFLICT DO UPDATE` | 112 ms | (its file) | 1.02 s bulk insert | on disk |
| Spark-side (state DataFrame joined per batch) | 3.4 s | (rewritten every batch) | 2.6 s | in the JVM |

sqlite's file could survive a restart locally, but the durable copy that other members restore from is
the shared changelog, so a restore still means a bulk insert; Spark-side state rewrites the whole state
every micro-batch, so its batch cost grows with state size rather than batch size. The dict folds a
batch 12× faster than sqlite and ~400× faster than Spark-side state and restores 2–5× faster; its limit
is memory, so a partition's state must fit in the executor's RAM (scale out by adding partitions).
The store never decides durability: the changelog and snapshots on the state path do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

VALUE_TYPES: Mapping[str, pa.DataType] = {"long": pa.int64(), "double": pa.float64(), "string": pa.string()}


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


class KeyedState:
    """Current value per key of one partition."""

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        self.values: dict[str, Any] = values if values is not None else {}

    def __len__(self) -> int:
        return len(self.values)

    def upsert(self, keys: Iterable[str], values: Iterable[Any]) -> None:
        """Set the given keys to the given values (how segments and committed batches are applied)."""
        self.values.update(zip(keys, values, strict=True))

    def apply_table(self, table: pa.Table) -> None:
        """Apply a segment or snapshot table of `key`/`value` rows."""
        self.upsert(table.column("key").to_pylist(), table.column("value").to_pylist())

    def to_table(self, value_type: str) -> pa.Table:
        return rows_table(self.values, value_type)
