"""A burst of member reports wakes one reconcile, not one each, and reconciles of one app start at
least `min_interval` apart (the per-app flag of controller.loops)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from streamapp.controller.handlers import Acknowledgements
from streamapp.controller.loops import AppLoops, Sources
from streamapp.controller.metrics import Metrics
from streamapp.controller.reconcile import Outcome

KEY = ("ns", "counts")
APP = {"metadata": {"namespace": "ns", "name": "counts", "resourceVersion": "1"}}
SOURCES = Sources(pods=lambda k: [], members=lambda k: [], zones=dict, supporting=lambda k: [])


class BlockingReconcile:
    """Counts reconciles and their start times; the first one waits until `release` is set."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.release = threading.Event()

    def __call__(self, *args: Any) -> Outcome:
        self.starts.append(time.monotonic())
        self.release.wait(60)
        return Outcome(None, None)


async def until(condition: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def test_reports_during_a_reconcile_coalesce_into_one_more() -> None:
    async def scenario() -> tuple[list[float], float]:
        step = BlockingReconcile()
        loops = AppLoops(None, Metrics(), min_interval=0.3, step=step)  # type: ignore[arg-type]
        loops.upsert(KEY, APP, SOURCES)
        await until(lambda: len(step.starts) == 1)
        for _ in range(500):  # 1,000 members reporting every 2 s, for one second
            loops.wake(KEY)
        await asyncio.sleep(1.0)
        released = time.monotonic()
        step.release.set()
        await until(lambda: len(step.starts) == 2)
        await asyncio.sleep(0.5)  # any further reconcile would follow within the debounce
        await loops.stop_all()
        return step.starts, released

    starts, released = asyncio.run(scenario())
    assert len(starts) == 2, "500 wakes while one reconcile ran make one more reconcile"
    # It waited 1 s (on the API server, say) using no CPU: the next one follows as soon as it ends,
    # not after waiting as long again.
    assert released <= starts[1] < released + 0.5


class BusyReconcile:
    """Spins on the CPU for `cpu` seconds each time, counting its start times."""

    def __init__(self, cpu: float) -> None:
        self.cpu = cpu
        self.starts: list[float] = []

    def __call__(self, *args: Any) -> Outcome:
        self.starts.append(time.monotonic())
        spent = time.thread_time()
        while time.thread_time() - spent < self.cpu:
            pass
        return Outcome(None, None)


def test_a_reconcile_that_used_the_cpu_spaces_the_next_one_by_twice_that() -> None:
    async def scenario() -> list[float]:
        step = BusyReconcile(0.3)
        loops = AppLoops(None, Metrics(), min_interval=0.1, step=step)  # type: ignore[arg-type]
        loops.upsert(KEY, APP, SOURCES)
        await until(lambda: len(step.starts) == 1)
        loops.wake(KEY)
        await until(lambda: len(step.starts) == 2)
        await loops.stop_all()
        return step.starts

    starts = asyncio.run(scenario())
    # 0.3 s of CPU keeps the loop idle 0.3 s more (BUSY_FRACTION 0.5), far beyond the 0.1-s interval;
    # the step stamps its start a little after the loop stamps it, hence not exactly 0.6.
    assert starts[1] - starts[0] >= 0.5


def test_without_wakes_a_loop_waits_for_its_deadline() -> None:
    async def scenario() -> int:
        step = BlockingReconcile()
        step.release.set()
        loops = AppLoops(None, Metrics(), min_interval=0.0, step=step)  # type: ignore[arg-type]
        loops.upsert(KEY, APP, SOURCES)
        await until(lambda: len(step.starts) == 1)
        await asyncio.sleep(0.5)
        await loops.stop_all()
        return len(step.starts)

    assert asyncio.run(scenario()) == 1


def test_the_spacing_is_the_interval_or_twice_the_cpu_used() -> None:
    loops = AppLoops(None, Metrics(), min_interval=1.0)  # type: ignore[arg-type]
    assert loops._spacing(0.02) == (1.0, 0.1), "an urgent wake need not wait out the interval"
    assert loops._spacing(3.0) == (6.0, 6.0), "but still leaves the loop idle half the time"


def test_an_urgent_wake_starts_the_next_reconcile_without_waiting_out_the_interval() -> None:
    async def scenario() -> list[float]:
        step = BusyReconcile(0.0)
        loops = AppLoops(None, Metrics(), min_interval=2.0, step=step)  # type: ignore[arg-type]
        loops.upsert(KEY, APP, SOURCES)
        await until(lambda: len(step.starts) == 1)
        loops.wake(KEY)  # a report: waits for the interval
        await asyncio.sleep(0.5)
        woken = len(step.starts)
        loops.wake(KEY, urgent=True)  # an acknowledgement: at once
        await until(lambda: len(step.starts) == 2, timeout=1.5)
        await loops.stop_all()
        return [woken, *step.starts]

    woken, *starts = asyncio.run(scenario())
    assert woken == 1, "a plain wake waits out the 2-s interval"
    assert len(starts) == 2 and starts[1] - starts[0] < 1.5, "an urgent one does not"


def test_an_acknowledgement_is_news_once_and_only_when_the_generation_rises() -> None:
    seen = Acknowledgements()

    def member(generation: int) -> dict[str, Any]:
        return {
            "metadata": {"uid": "m0"},
            "spec": {"generation": generation},
            "status": {"observedGeneration": generation},
        }

    assert not seen.new("ADDED", member(3)), "what the operator finds at start is not news"
    assert not seen.new("MODIFIED", member(3)), "a progress report"
    assert seen.new("MODIFIED", member(4))
    assert not seen.new("MODIFIED", member(4))
    assert not seen.new("DELETED", member(4))
    assert not seen.new("ADDED", member(5)), "a re-created member starts afresh"
