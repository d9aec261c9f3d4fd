"""Per-key sums over 1-minute tumbling event-time windows.

The state key is `<key>@<window start>`, so each window of each key is its own running sum and late
records simply update their window. Run it with `--pipeline streamapp.executor.samples.windowed:windowed`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp.executor.pipeline import transform

WINDOW = "1 minute"


@transform(merge="sum")
def windowed(batch: DataFrame) -> DataFrame:
    """Sum of the record values per key and window, pre-aggregated within the batch."""
    window_start = F.date_format(F.window("timestamp", WINDOW).start, "yyyy-MM-dd'T'HH:mm:ss")
    return batch.select(
        F.concat_ws("@", "key", window_start).alias("key"),
        F.col("value").cast("long").alias("value"),
    )
