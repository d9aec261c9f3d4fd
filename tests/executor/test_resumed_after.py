"""How long a task stood still when it resumed on an executor, measured from the commit manifests: the
rule (pure) and two real executors reporting it after a handoff and after a restart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dataplane_checks import executor_for
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession

from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import Target
from streamapp.executor.runtimeplane import RuntimeDataPlane
from streamapp.executor.state.manifest import Kind, Manifest
from streamapp.executor.task import Resumption, resumption

STARTED = 1_000.0


def batch(owner: str, at: float | None) -> Manifest:
    return Manifest(seq=3, epoch=1, kind=Kind.BATCH, start=0, end=10, owner=owner, committed_at=at)


FIRST = Manifest(seq=5, epoch=2, kind=Kind.BATCH, start=10, end=20, owner="app-1", committed_at=1_004.5)


def test_a_batch_of_this_owner_from_an_earlier_process_makes_a_restart() -> None:
    assert resumption(batch("app-1", 990.0), FIRST, "app-1", STARTED, False) == Resumption(14.5, "restart")


def test_another_owners_batch_makes_a_handoff_when_the_task_was_a_warm_copy_here() -> None:
    assert resumption(batch("app-0", 1_001.0), FIRST, "app-1", STARTED, True) == Resumption(3.5, "handoff")
    assert resumption(batch("app-0", 1_001.0), FIRST, "app-1", STARTED, False) == Resumption(3.5, "cold")


def test_this_process_taking_its_own_task_back_is_no_restart() -> None:
    """Its pod did not restart (the batch is from after the process began): what it took back was
    warm, so it is a move like any other."""
    assert resumption(batch("app-1", 1_002.0), FIRST, "app-1", STARTED, True) == Resumption(2.5, "handoff")


def test_without_an_earlier_batch_or_its_commit_time_nothing_is_measured() -> None:
    assert resumption(None, FIRST, "app-1", STARTED, True) is None
    assert resumption(batch("app-0", None), FIRST, "app-1", STARTED, True) is None


def reported(executor: object, task: int) -> tuple[float | None, str | None]:
    reports = RuntimeDataPlane(executor, CollectorRegistry()).reports()  # type: ignore[arg-type]
    found = next(r for r in reports if r.task == task)
    return found.resumed_after, found.resumed_by


@pytest.mark.spark
def test_executors_report_a_handoff_and_a_restart_with_how_long_each_task_stood_still(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = FileLog(tmp_path / "log")
    more = GenerateSpec(partitions=2, count=400, keys=20, seed=31)
    generate(log, more)
    a = executor_for(tmp_path, log, "app-0", max_batch_records=1_000)
    a.apply(Target(active={0: 1, 1: 1}))
    a.run_until_idle()
    assert reported(a, 0) == (None, None), "a fresh partition has no earlier batch to measure from"

    b = executor_for(tmp_path, log, "app-1")
    b.apply(Target(warmup=frozenset({0})))
    b.run_until_idle()
    generate(log, more)
    a.run_until_idle()  # the owner's last batch, which the warm copy applies at its takeover
    assert a.apply(Target(active={1: 1})) == frozenset({0})
    time.sleep(0.3)  # the acknowledgement and the new assignment travelling through the API server
    b.apply(Target(active={0: 2}))
    generate(log, more)
    b.run_until_idle()
    after, by = reported(b, 0)
    assert b.status()[0].restored_blocking > 0, "it applied the owner's last batch while active"
    assert by == "handoff" and after is not None and after >= 0.3, "and was a warm copy all the same"

    a.apply(Target())  # app-0's pod stops; a new process of the same pod takes partition 1 back
    time.sleep(0.3)
    restarted = executor_for(tmp_path, log, "app-0")
    restarted.apply(Target(active={1: 1}))
    generate(log, more)
    restarted.run_until_idle()
    after, by = reported(restarted, 1)
    assert by == "restart" and after is not None and after >= 0.3
    handed_off = reported(b, 0)
    b.apply(Target(standby=frozenset({0})))
    b.run_until_idle()
    assert reported(b, 0) == handed_off, "kept while the task stays on the executor"
