"""The user's pipeline: a PySpark transform from one input batch to keyed updates, plus a declared merge.

A transform is a function `DataFrame -> DataFrame`. Its input holds one partition's records for one
micro-batch (columns `offset`, `timestamp`, `key`, `value`); its output must have a string `key` column
and, unless the merge is `count`, a `value` column — one row per update, any number per key. Keep the
`offset` column when the merge depends on order (`last`, user merges).

Declare the merge next to the transform with the `transform` decorator, or pass it when loading:

```python
from streamapp.executor.pipeline import transform

@transform(merge="count")
def clicks_per_user(batch):
    return batch.select("key")
```
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql import DataFrame

from streamapp.executor import merge as merges
from streamapp.executor.expiry import Expiry, WindowEnd
from streamapp.executor.merge import Merge, UserMerge
from streamapp.executor.state import arrow_type

Transform = Callable[[DataFrame], DataFrame]
F = TypeVar("F", bound=Callable[..., Any])
_DECLARATION = "__streamapp_pipeline__"


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


def transform(
    merge: str | UserMerge = "sum",
    value_type: str = "long",
    window_end: WindowEnd | None = None,
    lateness: float | None = None,
) -> Callable[[F], F]:
    """Declare, on a transform function, how its updates merge into state and the type of the values;
    for windowed state, `window_end(key)` (epoch seconds) and a default `lateness` in seconds after
    which a window's state expires."""
    merges.resolve(merge)
    arrow_type(value_type)

    def declare(fn: F) -> F:
        setattr(fn, _DECLARATION, _Declaration(merge, value_type, window_end, lateness))
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
    )


def keyed_updates(pipeline: Pipeline, batch: DataFrame) -> pa.Table:
    """Run the transform and the merge's Spark-side combine; the result crosses to Python as Arrow.

    Built-in merges get values of the state's type; a user merge gets the transform's values as they are
    (its result must be of the state's type).
    """
    updates = pipeline.transform(batch)
    missing = {"key"} | (set() if pipeline.merge.name == "count" else {"value"})
    if not missing <= set(updates.columns):
        raise ValueError(
            f"transform {pipeline.name} must return columns {sorted(missing)}, got {updates.columns}"
        )
    combined = merges.combine(updates, pipeline.merge)
    table: pa.Table = combined.toArrow().select(["key", "value"])
    if pipeline.merge.user is not None:
        return table
    return table.cast(pa.schema([("key", pa.string()), ("value", arrow_type(pipeline.value_type))]))
