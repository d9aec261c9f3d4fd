"""The worker threads never starve or block the membership thread: `status` waits for no unit of work,
`apply` waits only for the batch in flight of a task it revokes, and a long restore delays neither
(no Spark needed: the tasks are stand-ins with the fields the executor reads)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from streamapp.executor.runtime import Executor, Target
from streamapp.executor.slot import Slot
from streamapp.executor.task import Role


class Busy:
    """A copy that always has work: each step takes a moment and counts itself."""

    due = False
    owning = False
    taking_over = False
    activated_at = None

    def __init__(self, steps: list[int], role: Role = Role.STANDBY) -> None:
        self.steps = steps
        self.role = role
        self.epoch = 0
        self.closed = False

    def step(self) -> int:
        time.sleep(0.002)
        self.steps.append(1)
        return 1

    def status(self) -> int:
        return len(self.steps)

    def assign(self, role: Role, epoch: int = 0) -> None:
        self.role, self.epoch = role, epoch

    def close(self) -> None:
        self.closed = True


class Restoring(Busy):
    """A copy whose first step is a restore that lasts until the test lets it finish."""

    def __init__(self, steps: list[int], started: threading.Event, finish: threading.Event) -> None:
        super().__init__(steps, Role.WARMUP)
        self.started = started
        self.finish = finish

    def step(self) -> int:
        self.started.set()
        self.finish.wait(60)
        return super().step()


def executor_with(tasks: dict[int, Busy], tmp_path: Path) -> Executor:
    executor = Executor(tmp_path, None, None, None)  # type: ignore[arg-type]
    executor.slots = {p: Slot(task) for p, task in tasks.items()}  # type: ignore[arg-type]
    return executor


def test_status_and_apply_get_in_between_two_units_of_work(tmp_path: Path) -> None:
    steps: list[int] = []
    executor = executor_with({p: Busy(steps) for p in range(4)}, tmp_path)
    stop = threading.Event()
    worker = threading.Thread(target=executor.run, args=(stop.is_set,), daemon=True)
    worker.start()
    try:
        waited = []
        for _ in range(50):
            time.sleep(0.005)  # a reporter calls now and then, not back to back
            before = len(steps)
            executor.status()
            executor.apply(Target(standby=frozenset(range(4))))
            waited.append(len(steps) - before)
        assert max(waited) <= 1, f"status and apply waited for {max(waited)} units of work"
    finally:
        stop.set()
        worker.join(5)
    assert len(steps) > 50, "the workers kept working meanwhile"


def test_status_and_apply_return_while_a_restore_is_in_progress(tmp_path: Path) -> None:
    started, finish = threading.Event(), threading.Event()
    steps: list[int] = []
    restoring = Restoring(steps, started, finish)
    executor = executor_with({0: restoring, 1: Busy(steps)}, tmp_path)
    stop = threading.Event()
    worker = threading.Thread(target=executor.run, args=(stop.is_set, 0.01), daemon=True)
    worker.start()
    try:
        assert started.wait(30), "the restore never started"
        assert len(executor.status()) == 2
        before = len(steps)
        deadline = time.monotonic() + 30
        while len(steps) < before + 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(steps) >= before + 20, "the other copy keeps tailing beside the restore"
        assert executor.apply(Target(active={0: 3}, standby=frozenset({1}))) == frozenset()
        assert restoring.role is Role.WARMUP, "the new role waits for the restore's unit to end"
        assert executor.slots[0].role is Role.ACTIVE, "but it is the role the task is given"
        assert executor.apply(Target(standby=frozenset({0, 1}))) == frozenset({0})
        assert executor.apply(Target(warmup=frozenset({0}), standby=frozenset({1}))) == frozenset()
        assert not finish.is_set() and started.is_set()
    finally:
        finish.set()
        stop.set()
        worker.join(10)
    assert restoring.role is Role.WARMUP


def test_a_revocation_waits_for_the_batch_in_flight_and_no_batch_starts_after(tmp_path: Path) -> None:
    class Batch(Busy):
        """An owning active task in the middle of a batch (held by the test's claim)."""

        owning = True

    task = Batch([], Role.ACTIVE)
    task.epoch = 1
    slot = Slot(task)  # type: ignore[arg-type]
    assert slot.claim()
    revoked = threading.Thread(target=slot.assign, args=(Role.STANDBY, 0))
    revoked.start()
    revoked.join(0.3)
    assert revoked.is_alive(), "the revocation waits while the batch is in flight"
    assert task.role is Role.ACTIVE
    slot.release()
    revoked.join(5)
    assert not revoked.is_alive() and task.role is Role.STANDBY
    assert slot.claim() and task.role is Role.STANDBY
    slot.release()


def test_a_task_is_never_claimed_by_two_threads(tmp_path: Path) -> None:
    slot = Slot(Busy([]))  # type: ignore[arg-type]
    claims: list[bool] = []
    threads = [threading.Thread(target=lambda: claims.append(slot.claim())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert claims.count(True) == 1
    slot.release()
    slot.retire()
    assert not slot.claim(), "a retired task starts no unit"
    assert slot.task.closed, "an idle task closes (checkpoints its local state) when it is retired"
