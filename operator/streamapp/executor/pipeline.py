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
from streamapp.executor.merge import Merge, UserMerge
from streamapp.executor.state import arrow_type

Transform = Callable[[DataFrame], DataFrame]
F = TypeVar("F", bound=Callable[..., Any])
_DECLARATION = "__streamapp_pipeline__"


@dataclass(frozen=True)
class Pipeline:
    """A loaded pipeline: the transform, its merge and the type of the state values."""

    name: str
    transform: Transform
    merge: Merge
    value_type: str = "long"


def transform(merge: str | UserMerge = "sum", value_type: str = "long") -> Callable[[F], F]:
    """Declare, on a transform function, how its updates merge into state and the type of the values."""
    merges.resolve(merge)
    arrow_type(value_type)

    def declare(fn: F) -> F:
        setattr(fn, _DECLARATION, (merge, value_type))
        return fn

    return declare


def load(spec: str, merge: str | None = None, value_type: str | None = None) -> Pipeline:
    """Load `module:function`; explicit `merge`/`value_type` override the function's declaration."""
    module, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(f"pipeline {spec!r} must be module:function")
    fn = getattr(importlib.import_module(module), attr)
    declared_merge, declared_type = getattr(fn, _DECLARATION, ("sum", "long"))
    chosen_type = value_type or declared_type
    arrow_type(chosen_type)
    return Pipeline(
        name=spec, transform=fn, merge=merges.resolve(merge or declared_merge), value_type=chosen_type
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
