"""What an executor's /metrics shows per task: records committed, when the last batch committed, and
the process's own memory and CPU."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dataplane_checks import executor_for, generated_log
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession

from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.runtime import Target
from streamapp.executor.runtimeplane import RuntimeDataPlane


@pytest.mark.spark
def test_committed_records_and_the_last_commit_per_task(spark: SparkSession, tmp_path: Path) -> None:
    del spark
    log = generated_log(tmp_path / "log", partitions=2, count=600, keys=20, seed=7)
    executor = executor_for(tmp_path, log, "a", max_batch_records=100)
    executor.apply(Target(active={0: 1, 1: 1}))
    began = time.time()
    executor.run_until_idle()
    registry = CollectorRegistry()
    plane = RuntimeDataPlane(executor, registry)
    plane.reports()
    plane.reports()  # a second report adds nothing: nothing new was committed

    def sample(name: str, task: int) -> float | None:
        return registry.get_sample_value(name, {"task": str(task)})

    assert registry.get_sample_value("process_resident_memory_bytes") is not None, "the process's own"
    for task in (0, 1):
        assert sample("streamapp_executor_committed_records_total", task) == log.end_offset(task)
        last = sample("streamapp_executor_last_commit_timestamp_seconds", task)
        assert last is not None and began <= last <= time.time()
    generate(log, GenerateSpec(partitions=2, count=200, keys=20, seed=8))
    executor.run_until_idle()
    plane.reports()
    for task in (0, 1):
        assert sample("streamapp_executor_committed_records_total", task) == log.end_offset(task)
