"""A 1M-key state restored from its snapshot plus the changelog after it equals the reference."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from dataplane_checks import executor_for
from pyspark.sql import SparkSession

from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import Target
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.replica import Replica

pytestmark = [pytest.mark.spark, pytest.mark.slow]

KEYS = 1_000_000
UPDATES = 300_000


def append_keys(log: FileLog, keys: list[str]) -> None:
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    log.append(
        0,
        pa.table(
            {
                "timestamp": pa.array([stamp] * len(keys), type=pa.timestamp("us", tz="UTC")),
                "key": keys,
                "value": ["1"] * len(keys),
            }
        ),
    )


def test_one_million_keys_restore_from_snapshot_and_changelog(spark: SparkSession, tmp_path: Path) -> None:
    log = FileLog(tmp_path / "log")
    every_key = [f"k{i:08d}" for i in range(KEYS)]
    append_keys(log, every_key)
    updated = [every_key[(i * 7_919) % KEYS] for i in range(UPDATES)]
    append_keys(log, updated)
    executor = executor_for(tmp_path, log, "m0", max_batch_records=250_000, snapshot_every=4)
    executor.apply(Target(active={0: 1}))
    executor.run_until_idle()

    replica = Replica(StateLayout(tmp_path / "state"), 0)
    assert replica.load_snapshot() == KEYS
    assert replica.head.seq == 4, "fence + four batches, then the snapshot"
    assert replica.catch_up() == 2, "two more batches come from the changelog"
    assert replica.head.offset == KEYS + UPDATES
    assert replica.state.values == dict(Counter(every_key + updated))
    assert replica.state.values == executor.tasks[0].replica.state.values
