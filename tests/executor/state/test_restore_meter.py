"""The executor's restore meter measures the member's restore throughput: rows over the wall seconds
during which at least one restore step ran, whatever the number of steps running side by side."""

from __future__ import annotations

import threading
import time

import pytest

from streamapp.executor.state.restores import MIN_ROWS, RestoreMeter


class Clock:
    """Seconds set by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_overlapping_steps_count_their_wall_time_once() -> None:
    """A step from 0 to 3 s and one from 1 to 4 s, 10,000 rows each: 20,000 rows in 4 s of wall time,
    not in the 6 s the two steps add up to."""
    clock = Clock()
    meter = RestoreMeter(clock)
    first, second = meter.timing(), meter.timing()
    a = first.__enter__()
    clock.now = 1.0
    b = second.__enter__()
    clock.now = 3.0
    a.append(10_000)
    first.__exit__(None, None, None)
    clock.now = 4.0
    b.append(10_000)
    second.__exit__(None, None, None)
    assert meter.rate() == 5_000.0


def test_the_rate_does_not_depend_on_how_many_restores_ran_together() -> None:
    """The same 20,000 rows restored in 4 s by one member, two steps one after the other or two side by
    side sharing its throughput: the same rate (summing each step's seconds said 5,000 and 2,500)."""
    clock = Clock()
    serial = RestoreMeter(clock)
    for _ in range(2):
        with serial.timing() as step:
            clock.now += 2.0
            step.append(10_000)
    clock.now = 100.0
    parallel = RestoreMeter(clock)
    steps = [parallel.timing() for _ in range(2)]
    running = [step.__enter__() for step in steps]
    clock.now = 104.0
    for step, timed in zip(steps, running, strict=True):
        timed.append(10_000)
        step.__exit__(None, None, None)
    assert serial.rate() == parallel.rate() == 5_000.0


def test_time_between_steps_is_not_restore_time() -> None:
    """Two steps of 1 s, 30 s apart (a standby tailing the changelog): 2 s of restoring."""
    clock = Clock()
    meter = RestoreMeter(clock)
    for _ in range(2):
        with meter.timing() as step:
            clock.now += 1.0
            step.append(10_000)
        clock.now += 30.0
    assert meter.rate() == 10_000.0


def test_a_step_under_way_counts_its_rows_and_time_so_far() -> None:
    """A snapshot of millions of rows is one step: halfway through it, its rows and seconds so far
    make the rate, not nothing (its rows) over everything (its time)."""
    clock = Clock()
    meter = RestoreMeter(clock)
    with meter.timing() as step:
        clock.now = 10.0
        step.append(50_000)
        assert meter.rate() == 5_000.0
        clock.now = 20.0
        step.append(50_000)
        assert meter.rate() == 5_000.0


def test_no_rate_below_the_minimum_rows_and_empty_steps_add_no_rows() -> None:
    clock = Clock()
    meter = RestoreMeter(clock)
    with meter.timing() as step:
        clock.now = 1.0
        step.append(MIN_ROWS - 1)
        step.append(0)
    assert meter.rate() is None
    with meter.timing() as step:
        clock.now = 2.0
        step.append(1)
    assert meter.rate() == MIN_ROWS / 2.0


def test_a_step_that_fails_still_ends() -> None:
    """A step that raises (a snapshot pruned while read) ends its interval: later idle time is not
    counted."""
    clock = Clock()
    meter = RestoreMeter(clock)
    with pytest.raises(FileNotFoundError), meter.timing() as step:
        clock.now = 1.0
        step.append(MIN_ROWS)
        raise FileNotFoundError
    clock.now = 50.0
    assert meter.rate() == float(MIN_ROWS)


def test_steps_on_several_threads() -> None:
    """The copy lane restores on several threads, side by side (each step waits on its reads, as on
    a store): every row is counted, and the restoring time is never more than the wall time the
    threads ran in (the steps' own seconds add up to about four times that)."""
    meter = RestoreMeter()
    start = threading.Barrier(4)

    def restore() -> None:
        start.wait()
        for _ in range(20):
            with meter.timing() as step:
                time.sleep(0.005)
                step.append(250)

    began = time.perf_counter()
    threads = [threading.Thread(target=restore) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    assert meter.rows == 4 * 20 * 250
    rate = meter.rate()
    assert rate is not None and meter.rows / rate <= elapsed * 1.01
