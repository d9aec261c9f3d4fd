"""Keyed running counts: how many records each key has had so far.

Run it with `--pipeline streamapp.executor.samples.counts:counts`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from streamapp.executor.pipeline import transform


@transform(merge="count", keys_from_input=True)
def counts(batch: DataFrame) -> DataFrame:
    """One update per record, keyed by the record's key; the `count` merge adds them up per key."""
    return batch.select("key")
