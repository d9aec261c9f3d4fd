"""Declared merges: how a batch's keyed updates fold into a partition's state.

A merge has two halves. `combine` runs in Spark and pre-aggregates one batch's updates to at most one
row per key, so only as many rows as there are distinct keys cross from the JVM to Python. `fold` then
combines that row with the value already in the local store. Built-ins are associative, so the split
is exact. A user merge is an arbitrary `f(old | None, update) -> new`; it is not assumed associative, so
its updates are not pre-aggregated but folded one by one, in input order when the updates carry an
`offset` column.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

UserMerge = Callable[[Any, Any], Any]
BUILTINS = ("sum", "count", "min", "max", "last")


@dataclass(frozen=True)
class Merge:
    """A named merge; `user` is set for user functions."""

    name: str
    user: UserMerge | None = None


def resolve(spec: str | UserMerge) -> Merge:
    """A merge from a built-in name, a `module:function` path, or a callable."""
    if callable(spec):
        return Merge(name=getattr(spec, "__qualname__", "user"), user=spec)
    if spec in BUILTINS:
        return Merge(name=spec)
    if ":" in spec:
        module, _, attr = spec.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        return Merge(name=spec, user=fn)
    raise ValueError(f"unknown merge {spec!r}: use one of {', '.join(BUILTINS)} or module:function")


def combine(updates: DataFrame, merge: Merge, groups: tuple[str, ...] = ()) -> DataFrame:
    """Pre-aggregate one batch to one `(key, value)` row per key (Spark side), or keep rows for user folds.

    `count` ignores values; `last` needs the `offset` column to know which update came last. `groups`
    are columns that split the batch before the key (the partition, when one Spark job serves several
    partitions' batches); they are kept in front of `key`.
    """
    columns = set(updates.columns)
    keys = [*groups, "key"]
    if merge.name == "count":
        return updates.groupBy(*keys).agg(F.count(F.lit(1)).alias("value"))
    if merge.user is not None:
        ordered = updates.orderBy(*groups, "offset") if "offset" in columns else updates
        return ordered.select(*keys, "value")
    if merge.name == "last":
        if "offset" not in columns:
            raise ValueError("merge 'last' needs the transform to keep the input 'offset' column")
        return updates.groupBy(*keys).agg(F.max_by("value", "offset").alias("value"))
    aggregate = {"sum": F.sum, "min": F.min, "max": F.max}[merge.name]
    return updates.groupBy(*keys).agg(aggregate("value").alias("value"))


def _fold_builtin(name: str, old: Any, new: Any) -> Any:
    if old is None:
        return new
    if name in ("sum", "count"):
        return old + new
    if name == "min":
        return min(old, new)
    if name == "max":
        return max(old, new)
    return new


class Lookup(Protocol):
    """What `fold` reads of the store: a key's value, None when absent."""

    def get(self, key: str) -> Any: ...


@dataclass(frozen=True)
class ReadAhead:
    """A fold's reads when the batch's input keys were looked up before its updates were known
    (`Task.read_ahead`): those values, and the store for a key the input did not have."""

    known: Mapping[str, Any]
    store: Lookup

    def get(self, key: str) -> Any:
        return self.known[key] if key in self.known else self.store.get(key)


def fold(current: Lookup, keys: Iterable[str], values: Iterable[Any], merge: Merge) -> dict[str, Any]:
    """New values of every key the batch touched; pure (the store is only read).

    Returns the changed rows, which become the changelog segment and the outputs; the caller applies
    them to the store only after the batch is committed.
    """
    changed: dict[str, Any] = {}
    for key, value in zip(keys, values, strict=True):
        old = changed[key] if key in changed else current.get(key)
        changed[key] = (
            merge.user(old, value) if merge.user is not None else _fold_builtin(merge.name, old, value)
        )
    return changed
