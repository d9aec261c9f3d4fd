"""Warmup → promotion → revoke between two runtimes, while input keeps arriving: exactly-once holds."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from dataplane_checks import check_partition, executor_for, generated_log
from pyspark.sql import SparkSession

from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import Target
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.replica import rebuild
from streamapp.executor.task import Role

pytestmark = pytest.mark.spark


def test_warmup_catches_up_is_promoted_and_the_old_owner_is_revoked(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = FileLog(tmp_path / "log")
    more = GenerateSpec(partitions=2, count=1_500, keys=200, seed=21)
    generate(log, GenerateSpec(partitions=2, count=9_000, keys=200, seed=21))
    a = executor_for(tmp_path, log, "a", max_batch_records=1_000, snapshot_every=100)
    a.apply(Target(active={0: 1, 1: 1}))
    for _ in range(4):
        a.step()

    b = executor_for(tmp_path, log, "b", max_batch_records=1_000, max_apply_per_step=2)
    b.apply(Target(warmup=frozenset({0}), standby=frozenset({1})))
    behind = a.status()[0].committed_offset
    lags = [b.status()[0].lag]
    for _ in range(6):
        generate(log, more)
        a.step()
        b.step()
        lags.append(b.status()[0].lag)
    assert lags[0] == behind > 0, "a warmup with no state is as far behind as the owner's history"
    assert lags[-1] < lags[0], "it catches up while the owner keeps processing"
    while b.step() > 0 or a.step() > 0:
        pass
    warm = b.status()[0]
    assert (warm.role, warm.lag, warm.applied_offset) == (Role.WARMUP, 0, log.end_offset(0))

    assert a.apply(Target(active={1: 1})) == frozenset({0})
    assert b.apply(Target(active={0: 2}, standby=frozenset({1}))) == frozenset()
    for _ in range(3):
        generate(log, more)
        a.step()
        b.step()
    a.run_until_idle()
    b.run_until_idle()

    layout = StateLayout(tmp_path / "state")
    for partition in (0, 1):
        check_partition(layout, tmp_path / "outputs", log, partition)
    owners = [(m.owner, m.epoch) for m in accepted_manifests(layout, 0)]
    switch = owners.index(("b", 2))
    assert set(owners[:switch]) == {("a", 1)} and set(owners[switch:]) == {("b", 2)}
    standby = b.tasks[1]
    assert standby.replica.state.values == rebuild(layout, 1).state.values
    assert b.status()[1].lag == 0


def test_a_revocation_from_another_thread_waits_for_the_batch_in_flight(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = generated_log(tmp_path / "log", partitions=1, count=40_000, keys=200, seed=22)
    a = executor_for(tmp_path, log, "a", max_batch_records=1_000)
    a.apply(Target(active={0: 1}))
    stop = threading.Event()
    worker = threading.Thread(target=a.run, args=(stop.is_set, 0.01))
    worker.start()
    try:
        while a.status()[0].applied_offset < 3_000:
            time.sleep(0.05)
        assert a.apply(Target()) == frozenset({0})
        layout = StateLayout(tmp_path / "state")
        released_at = manifests.latest_seq(layout, 0, -1)
        time.sleep(0.5)
        assert manifests.latest_seq(layout, 0, -1) == released_at, "nothing is committed after the release"
    finally:
        stop.set()
        worker.join(60)

    b = executor_for(tmp_path, log, "b", max_batch_records=5_000)
    b.apply(Target(active={0: 2}))
    b.run_until_idle()
    check_partition(layout, tmp_path / "outputs", log, 0)
