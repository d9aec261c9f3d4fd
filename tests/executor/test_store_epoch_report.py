"""An executor reports the store's highest epoch per task, and `fencedBy` while the store fences it.

This is what lets the operator resume above the store after losing its intent: a re-created app's
owner starts at epoch 1 on a store at epoch 5, reports itself fenced instead of silently tailing, and
processes again — exactly once — as soon as it is given an epoch above the store's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dataplane_checks import check_partition, executor_for, generated_log
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession

from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.runtime import Target
from streamapp.executor.runtimeplane import RuntimeDataPlane
from streamapp.executor.state.layout import StateLayout

pytestmark = pytest.mark.spark


def test_a_restarted_owner_below_the_store_epoch_reports_fenced_then_resumes_above_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=3_000, keys=40, seed=3)
    before = executor_for(tmp_path, log, "before", max_batch_records=1_000)
    before.apply(Target(active={0: 5}))
    before.run_until_idle()
    assert before.status()[0].store_epoch == 5 and before.status()[0].fenced_by is None

    # The app is re-created: its intent is gone and epochs restart at 1 on the same store.
    after = executor_for(tmp_path, log, "after", max_batch_records=1_000)
    after.apply(Target(active={0: 1}))
    status = after.status()[0]
    assert (status.store_epoch, status.fenced_by) == (5, 5)  # known before it even tries
    generate(log, GenerateSpec(partitions=1, count=2_000, keys=40, seed=4))
    after.run_until_idle()
    status = after.status()[0]
    assert (status.store_epoch, status.fenced_by, status.input_lag) == (5, 5, None)
    assert status.applied_offset == 3_000  # it tails the store: nothing of the new input is processed

    after.apply(Target(active={0: 6}))
    after.run_until_idle()
    status = after.status()[0]
    assert (status.store_epoch, status.fenced_by) == (6, None)
    check_partition(StateLayout(tmp_path / "state"), tmp_path / "outputs", log, 0)


def test_copies_report_the_store_epoch_in_the_member_status(spark: SparkSession, tmp_path: Path) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=1_000, keys=10, seed=5)
    owner = executor_for(tmp_path, log, "owner")
    owner.apply(Target(active={0: 3}))
    owner.run_until_idle()
    copy = executor_for(tmp_path, log, "copy")
    copy.apply(Target(standby=frozenset({0})))
    status = copy.status()[0]
    assert (status.store_epoch, status.fenced_by) == (3, None)  # read from the store before any step
    [report] = RuntimeDataPlane(copy, CollectorRegistry()).reports()
    assert (report.role, report.store_epoch, report.fenced_by) == ("standby", 3, None)
