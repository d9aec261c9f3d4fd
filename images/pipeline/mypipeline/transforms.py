"""The running total of each key's amounts (the record's value parsed as a number; 1 when it is not)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp.executor.pipeline import transform


@transform(merge="sum", value_type="double")
def amount_per_key(batch: DataFrame) -> DataFrame:
    """One update per record, keyed as it came; the `sum` merge keeps each key's total."""
    amount = F.coalesce(F.col("value").cast("double"), F.lit(1.0))
    return batch.select("key", amount.alias("value"))
