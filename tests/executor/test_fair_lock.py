"""The worker thread never starves the membership thread: `apply` and `status` get in after at most
the unit of work in flight, however busy the tasks are (no Spark needed: the tasks are stand-ins)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from streamapp.executor.runtime import Executor


class Busy:
    """A task that always has work: each step takes a moment and counts itself."""

    def __init__(self, steps: list[int]) -> None:
        self.steps = steps

    def step(self) -> int:
        time.sleep(0.002)
        self.steps.append(1)
        return 1

    def status(self) -> int:
        return len(self.steps)

    def assign(self, *_: Any) -> None:
        pass


def test_status_and_apply_get_in_between_two_units_of_work(tmp_path: Path) -> None:
    executor = Executor(tmp_path, None, None, None)  # type: ignore[arg-type]
    steps: list[int] = []
    executor.tasks = {p: Busy(steps) for p in range(4)}  # type: ignore[dict-item]
    stop = threading.Event()
    worker = threading.Thread(target=executor.run, args=(stop.is_set,), daemon=True)
    worker.start()
    try:
        waited = []
        for _ in range(50):
            time.sleep(0.005)  # a reporter calls now and then, not back to back
            before = len(steps)
            executor.status()
            waited.append(len(steps) - before)
        assert max(waited) <= 1, f"status waited for {max(waited)} units of work"
    finally:
        stop.set()
        worker.join(5)
    assert len(steps) > 50, "the worker kept working meanwhile"
