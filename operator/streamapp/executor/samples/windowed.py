"""Per-key sums over 1-minute tumbling event-time windows, expired 5 minutes after newer windows.

The state key is `<key>@<window start>`, so each window of each key is its own running sum and late
records update their window — until the window is more than the allowed lateness (5 minutes, or the
app's `pipeline.allowedLateness`) older than the newest window of the partition: then its row is
deleted from the state (a tombstone, a null value, in the outputs marks it final) and records still
arriving for it are dropped. State stays bounded by keys × (lateness / window + 1) windows.
Run it with `--pipeline streamapp.executor.samples.windowed:windowed`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamapp.executor.pipeline import transform

WINDOW = "1 minute"
WINDOW_SECONDS = 60.0
LATENESS_SECONDS = 300.0
START_FORMAT = "%Y-%m-%dT%H:%M:%S"


def window_end(key: str) -> float:
    """When the window of a state key ends, in epoch seconds (window starts are formatted in UTC)."""
    start = datetime.strptime(key.rsplit("@", 1)[1], START_FORMAT).replace(tzinfo=UTC)
    return start.timestamp() + WINDOW_SECONDS


@transform(merge="sum", window_end=window_end, lateness=LATENESS_SECONDS)
def windowed(batch: DataFrame) -> DataFrame:
    """Sum of the record values per key and window, pre-aggregated within the batch."""
    start = F.window("timestamp", WINDOW).start
    window_start = F.date_format(F.to_utc_timestamp(start, F.current_timezone()), "yyyy-MM-dd'T'HH:mm:ss")
    return batch.select(
        F.concat_ws("@", "key", window_start).alias("key"),
        F.col("value").cast("long").alias("value"),
    )
