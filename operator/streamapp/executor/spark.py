"""The executor process's one SparkSession.

Starting a session costs seconds and about 1 GiB of JVM, so a process starts it once, on first use, and
every task reuses it. The defaults suit many small per-partition micro-batches: few shuffle partitions
(the default 200 makes small aggregations 20–50% slower), no UI, Arrow transfers to Python.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

DEFAULT_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": str(max(1, min(4, os.cpu_count() or 1))),
    "spark.default.parallelism": str(max(1, min(4, os.cpu_count() or 1))),
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
}


@dataclass(frozen=True)
class SparkSettings:
    """`master` (`local[*]` or any cluster URL) and extra `conf` entries, which override the defaults."""

    master: str = "local[*]"
    app_name: str = "streamapp-executor"
    conf: Mapping[str, str] = field(default_factory=dict)

    def merged_conf(self) -> dict[str, str]:
        return {**DEFAULT_CONF, **self.conf}


def session(settings: SparkSettings | None = None) -> SparkSession:
    """The process's session, started on the first call; later calls return it (settings then ignored)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    chosen = settings or SparkSettings()
    builder = SparkSession.builder.master(chosen.master).appName(chosen.app_name)
    for key, value in chosen.merged_conf().items():
        builder = builder.config(key, value)
    spark: SparkSession = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
