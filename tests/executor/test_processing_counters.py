"""An executor's processing counters, what the operator's autoscaler measures a member's true rate by:
records its active tasks committed and seconds its batch rounds ran, since it started (no Spark)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

import streamapp.executor.runtimeplane as runtimeplane
from streamapp.executor.runtimeplane import RuntimeDataPlane
from streamapp.executor.task import Role, TaskStatus


@dataclass
class Committing:
    """Stands in for the runtime: each task's records committed since it came to this executor."""

    committed: dict[int, int] = field(default_factory=dict)

    def status(self) -> list[TaskStatus]:
        return [
            TaskStatus(task, Role.ACTIVE, 1, 0, 0, 0, 0, 0, 0, None, committed_records=records)
            for task, records in sorted(self.committed.items())
        ]

    def full_restore_counts(self) -> dict[str, int]:
        return {}


def test_records_count_what_grew_and_rounds_count_their_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([10.0, 10.5, 20.0, 20.25])
    monkeypatch.setattr(runtimeplane.time, "monotonic", lambda: next(clock))
    executor = Committing({0: 100, 1: 50})
    plane = RuntimeDataPlane(executor, CollectorRegistry())  # type: ignore[arg-type]
    assert plane.processing() == (0, 0.0)
    for _ in range(2):
        with plane.batch_round():
            pass
    plane.reports()
    assert plane.processing() == (150, 0.75)
    executor.committed = {0: 130, 2: 40}  # task 1 left; task 2 came
    plane.reports()
    plane.reports()  # nothing new committed: nothing added
    assert plane.processing() == (220, 0.75)
