"""The user's pipeline: a PySpark transform from one input batch to keyed updates, plus a declared merge.

A transform is a function `DataFrame -> DataFrame`. Its input holds one partition's records for one
micro-batch (several partitions' if it declares `keys_from_input`; columns `offset`, `timestamp`,
`key`, `value`); its output must have a string `key` column and, unless the merge is `count`, a `value`
column — one row per update, any number per key. Keep the `offset` column when the merge depends on
order (`last`, user merges).

Declare the merge next to the transform with the `transform` decorator, or pass it when loading:

```python
from streamapp.executor.pipeline import transform

@transform(merge="count")
def clicks_per_user(batch):
    return batch.select("key")
```
"""

from __future__ import annotations

import datetime as dt
import importlib
import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sql

from streamapp.executor import merge as merges
from streamapp.executor.io import source
from streamapp.executor.io.source import FileLog
from streamapp.executor.merge import Merge, UserMerge
from streamapp.executor.state.expiry import Expiry, WindowEnd
from streamapp.executor.state.stores import arrow_type

Transform = Callable[[DataFrame], DataFrame]
F = TypeVar("F", bound=Callable[..., Any])
_DECLARATION = "__streamapp_pipeline__"
PARTITION = "__streamapp_partition"


@dataclass(frozen=True)
class Pipeline:
    """A loaded pipeline: the transform, its merge, the type of the state values and, for windowed
    state, how to expire it (see `expiry`)."""

    name: str
    transform: Transform
    merge: Merge
    value_type: str = "long"
    window_end: WindowEnd | None = None
    lateness: float | None = None
    keys_from_input: bool = False

    def expiry(self) -> Expiry | None:
        """A fresh watermark tracker for one partition, when the pipeline's state expires."""
        if self.window_end is None or self.lateness is None:
            return None
        return Expiry(self.window_end, self.lateness)


@dataclass(frozen=True)
class _Declaration:
    merge: str | UserMerge = "sum"
    value_type: str = "long"
    window_end: WindowEnd | None = None
    lateness: float | None = None
    keys_from_input: bool = False


def transform(
    merge: str | UserMerge = "sum",
    value_type: str = "long",
    window_end: WindowEnd | None = None,
    lateness: float | None = None,
    keys_from_input: bool = False,
) -> Callable[[F], F]:
    """Declare, on a transform function, how its updates merge into state and the type of the values;
    for windowed state, `window_end(key)` (epoch seconds) and a default `lateness` in seconds after
    which a window's state expires.

    `keys_from_input=True` promises that every update's key is the key of one of the batch's input
    records (a transform that selects, filters, maps values or aggregates per key). Since a key's
    records are all in one partition, the executor may then run the transform once over several
    partitions' records (`updates_by_input_key`), which at small batches is most of a round's cost.
    A round where the promise does not hold is run again one transform per partition."""
    merges.resolve(merge)
    arrow_type(value_type)

    def declare(fn: F) -> F:
        declared = _Declaration(merge, value_type, window_end, lateness, keys_from_input)
        setattr(fn, _DECLARATION, declared)
        return fn

    return declare


def load(
    spec: str, merge: str | None = None, value_type: str | None = None, lateness: float | None = None
) -> Pipeline:
    """Load `module:function`; explicit `merge`/`value_type`/`lateness` override the declaration."""
    module, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(f"pipeline {spec!r} must be module:function")
    fn = getattr(importlib.import_module(module), attr)
    declared: _Declaration = getattr(fn, _DECLARATION, _Declaration())
    chosen_type = value_type or declared.value_type
    arrow_type(chosen_type)
    if lateness is not None and declared.window_end is None:
        raise ValueError(f"pipeline {spec!r} declares no window_end, so its state cannot expire by lateness")
    return Pipeline(
        name=spec,
        transform=fn,
        merge=merges.resolve(merge or declared.merge),
        value_type=chosen_type,
        window_end=declared.window_end,
        lateness=lateness if lateness is not None else declared.lateness,
        keys_from_input=declared.keys_from_input,
    )


def keyed_updates(pipeline: Pipeline, batch: DataFrame) -> pa.Table:
    """Run the transform and the merge's Spark-side combine; the result crosses to Python as Arrow.

    Built-in merges get values of the state's type; a user merge gets the transform's values as they are
    (its result must be of the state's type).
    """
    combined = merges.combine(_transformed(pipeline, batch), pipeline.merge)
    return _typed(pipeline, combined.toArrow().select(["key", "value"]))


def warm_up(pipeline: Pipeline, spark: SparkSession) -> bool:
    """Run each kind of round once on two made-up records read back from a scratch file log; returns
    whether it ran.

    Why: a fresh JVM's first jobs are slow (class loading, code generation, Python workers), and a
    member whose first job is a batch of a task it just took over makes that task stand still for it.
    The executor runs this before it reports ready, so that cost is paid before it is given any task.
    Each kind of round compiles its own plan: a round of one due partition runs `keyed_updates`, a
    round of several `keyed_updates_by_partition` (or, for a pipeline whose keys come from its input,
    `updates_by_input_key`, on records handed over and on a scan), and each starts with a read of the
    file log (a
    small batch, like these, is read in process and handed over as Arrow). Warming only the shared job
    on rows made in memory left a member's first single-partition batch from the log at 3-10 s against
    ~0.7 s for the next ones (fresh sessions on 2 busy cores, when the log was always scanned by
    Spark; 0.8-1.2 s with all three warmed), and a member given one task after a scale-out runs
    exactly that round.
    A transform that cannot digest made-up records only loses the warm-up: it is logged, not raised.
    """
    try:
        with tempfile.TemporaryDirectory(prefix="streamapp-warm-up-") as scratch:
            log = FileLog(Path(scratch))
            stamp = pa.array([dt.datetime.now(dt.UTC)], pa.timestamp("us", tz="UTC"))
            for partition in (0, 1):
                key = [f"streamapp-warm-up-{partition}"]  # keys never span partitions
                log.append(partition, pa.table({"timestamp": stamp, "key": key, "value": ["1"]}))
            frames = {partition: log.read(spark, partition, 0, 1) for partition in (0, 1)}
            keyed_updates(pipeline, frames[0])
            keyed_updates_by_partition(pipeline, frames)
            if pipeline.keys_from_input:  # handed over as Arrow, and scanned (a round of many records)
                records = {p: log.read_arrow(p, 0, 1) for p in (0, 1)}
                updates_by_input_key(pipeline, spark, records)
                updates_by_input_key(
                    pipeline, spark, records, scanned=log.scan(spark, {0: (0, 1), 1: (0, 1)})
                )
    except (
        Exception
    ) as error:  # a transform failing on made-up input (or no scratch space) is no reason to stop
        logging.getLogger(__name__).warning("Spark warm-up skipped: %s", error)
        return False
    return True


def keyed_updates_by_partition(
    pipeline: Pipeline, batches: Mapping[int, DataFrame], slices: int = 1
) -> dict[int, pa.Table]:
    """`keyed_updates` of several partitions' batches in one Spark job, split by partition afterwards."""
    return combined_updates(
        pipeline,
        {partition: labelled(pipeline, partition, batch) for partition, batch in batches.items()},
        slices,
    )


def combined_updates(
    pipeline: Pipeline, frames: Mapping[int, DataFrame], slices: int = 1
) -> dict[int, pa.Table]:
    """The updates of several partitions' `labelled` frames, computed in one Spark job.

    Each batch was transformed on its own (the transform sees one partition's records, as always); the
    partition was added as a literal column only after the transform, so a transform that drops or
    renames columns cannot lose it, and the combine groups by (partition, key). One job and one Arrow
    transfer replace one per partition, which is where a small batch spends most of its time.

    The union is coalesced to `slices` scan tasks before the combine: unioned, each partition's batch
    would be a task of its own, and scheduling those dominates a round of small batches (measured in
    `bench/dataplane.py`: 8 partitions × 1,000 records took 2.4–3.3 s in 8 tasks, 1.5 s in one).
    """
    union = _union([frame for _, frame in sorted(frames.items())]).coalesce(slices)
    table = merges.combine(union, pipeline.merge, (PARTITION,)).toArrow()
    column = table.column(PARTITION)
    return {
        partition: _typed(pipeline, table.filter(pc.equal(column, partition)).select(["key", "value"]))
        for partition in sorted(frames)
    }


def updates_by_input_key(
    pipeline: Pipeline,
    spark: SparkSession,
    records: Mapping[int, pa.Table],
    slices: int = 1,
    scanned: DataFrame | None = None,
) -> dict[int, pa.Table] | None:
    """`keyed_updates` of several partitions' records, read in this process, with one transform over
    all of them; None when the pipeline's `keys_from_input` promise did not hold for these records.
    `scanned` is the same records as Spark scanned them, when that beats handing them over as Arrow.

    Why: the union of one transformed frame per partition costs Spark's driver a plan per partition
    (bench/results/dataplane.md: at 32 partitions × 1,000 records a round took 1.6× Structured
    Streaming's time, almost all of it planning). With keys that never span partitions and updates
    keyed by their input's keys, the updates of all partitions' records together are each partition's
    own, and each update belongs to the partition whose input holds its key (`owners`)."""
    owned = owners(records)
    if owned is None:
        return None
    frame = scanned
    if frame is None:
        frame = source.arrow_frame(spark, pa.concat_tables(records[p] for p in sorted(records)))
    updates = keyed_updates(pipeline, frame.coalesce(slices))
    where = pc.index_in(updates.column("key"), value_set=owned.column("key"))
    if where.null_count:
        return None
    partition = owned.column(PARTITION).take(where)
    return {p: updates.filter(pc.equal(partition, p)) for p in sorted(records)}


def owners(records: Mapping[int, pa.Table]) -> pa.Table | None:
    """Each input key and the partition whose records hold it (columns `key`, PARTITION); None when a
    key is in the records of two partitions, so an update keyed by it could be either's. Pure."""
    tables = []
    for partition in sorted(records):
        keys = pc.unique(records[partition].column("key"))
        tables.append(pa.table({"key": keys, PARTITION: pa.array([partition] * len(keys), pa.int64())}))
    if not tables:
        return pa.table({"key": pa.array([], pa.string()), PARTITION: pa.array([], pa.int64())})
    owned = pa.concat_tables(tables)
    return owned if len(pc.unique(owned.column("key"))) == owned.num_rows else None


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    """The frames' union, built as a balanced tree of pairs.

    Why: Spark analyses each union's whole plan when it is made, so folding n frames one onto the next
    analyses 1 + 2 + ... + n branches (a quarter of a round of 32 partitions, bench/results/dataplane.md);
    pairs analyse each branch once per level, log2(n) times. The optimizer flattens the tree into one
    union either way, so the job is the same."""
    level = list(frames)
    while len(level) > 1:
        paired = [a.unionByName(b) for a, b in zip(level[::2], level[1::2], strict=False)]
        level = paired + level[len(paired) * 2 :]
    return level[0]


def labelled(pipeline: Pipeline, partition: int, batch: DataFrame) -> DataFrame:
    """One partition's transformed batch with only the columns the merge reads, plus the partition:
    what `combined_updates` unions. Building it is driver work (the transform's plan analysed), so a
    round builds its partitions' frames side by side."""
    updates = _transformed(pipeline, batch)
    ordered = _ordered(pipeline) and "offset" in updates.columns
    return updates.select(sql.lit(partition).alias(PARTITION), *_columns(pipeline, with_offset=ordered))


def _transformed(pipeline: Pipeline, batch: DataFrame) -> DataFrame:
    updates = pipeline.transform(batch)
    missing = set(_columns(pipeline, with_offset=False))
    if not missing <= set(updates.columns):
        raise ValueError(
            f"transform {pipeline.name} must return columns {sorted(missing)}, got {updates.columns}"
        )
    return updates


def _columns(pipeline: Pipeline, with_offset: bool) -> list[str]:
    """The transform's columns the merge reads: the union keeps only these, so every partition's frame
    has the same shape whatever else the transform returns."""
    value = [] if pipeline.merge.name == "count" else ["value"]
    return ["key", *value, *(["offset"] if with_offset else [])]


def _ordered(pipeline: Pipeline) -> bool:
    """Whether the merge reads the input order (`last`, user merges), so the union must keep `offset`."""
    return pipeline.merge.name == "last" or pipeline.merge.user is not None


def _typed(pipeline: Pipeline, table: pa.Table) -> pa.Table:
    if pipeline.merge.user is not None:
        return table
    return table.cast(pa.schema([("key", pa.string()), ("value", arrow_type(pipeline.value_type))]))
