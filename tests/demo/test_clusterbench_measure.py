"""The cluster benchmark's measurements from commits and input timestamps (bench/clusterbench/measure.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clusterbench.measure import (
    RestoreCounter,
    latencies,
    phase_gaps,
    restore_counts,
    usual_gap,
    window_latency,
    worst_window,
)
from demo.commits import Commit


def commits_every(partition: int, times: list[float], per_batch: int = 10) -> list[Commit]:
    return [Commit(partition, i, i * per_batch, (i + 1) * per_batch, "m0", at) for i, at in enumerate(times)]


def test_the_usual_gap_is_the_median_cadence() -> None:
    assert usual_gap(commits_every(0, [0, 2, 4, 6, 20, 22]), 0) == 2.0


def test_the_usual_gap_counts_only_gaps_within_quiet_stretches() -> None:
    # 1-s batches while quiet, 3-s ones in a phase that slowed them: over the whole run the median
    # would be 3 s, and the phase's slow batches would stall nothing.
    times = [0.0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 22, 23]
    commits = commits_every(0, times)
    assert usual_gap(commits, 0) == 3.0
    assert usual_gap(commits, 0, [(0.0, 3.0), (21.0, 23.0)]) == 1.0
    assert usual_gap(commits, 0, [(100.0, 200.0)]) == 3.0  # no gap in them: the whole run


def test_a_stand_still_counts_beyond_the_usual_gap_and_from_the_last_commit_before_the_window() -> None:
    # task 0 commits every 2 s but stands still from 10 to 30; task 1 never stops
    task0 = commits_every(0, [0, 2, 4, 6, 8, 10, 30, 32, 34])
    task1 = commits_every(1, [float(t) for t in range(0, 36, 2)])
    gaps = phase_gaps([*task0, *task1], {0: 2.0, 1: 2.0}, since=12.0, until=34.0)
    assert gaps.longest_s == 20.0
    assert gaps.longest_task == 0
    assert gaps.stall_s == 18.0
    assert gaps.worst_task_stall_s == 18.0
    assert gaps.stalled_tasks == 1


def test_every_gap_counts_by_its_excess_over_the_usual_cadence_with_no_threshold() -> None:
    # usual cadence 1 s; during the phase every batch takes 4 s (the cores are busy): each of the 9
    # gaps of each task adds 3 s, where a threshold of twice the phase's cadence counted none
    slow = [float(t) for t in range(0, 40, 4)]
    gaps = phase_gaps(
        [*commits_every(0, slow), *commits_every(1, slow)], {0: 1.0, 1: 1.0}, since=0.0, until=36.0
    )
    assert gaps.phase_cadence_s == 4.0
    assert gaps.longest_s == 4.0
    assert gaps.stall_s == 2 * 9 * 3.0
    assert gaps.worst_task_stall_s == 27.0
    assert gaps.stalled_tasks == 2
    # a gap of 1.5 s against a cadence of 1 s: half a second, not 0 (nor a jump past a threshold)
    nearly = phase_gaps(commits_every(0, [0, 1, 2, 3.5, 4.5]), {0: 1.0}, since=0.0, until=4.5)
    assert nearly.stall_s == pytest.approx(0.5)


def test_a_task_that_never_commits_again_stood_still_until_the_window_ends() -> None:
    gaps = phase_gaps(commits_every(0, [0, 2, 4]), {0: 2.0}, since=5.0, until=50.0)
    assert gaps.longest_s == 46.0
    assert gaps.stall_s == 44.0


def test_latency_is_commit_time_minus_append_time_of_each_record_in_the_window() -> None:
    stamps = {0: np.array([0.0, 0.0, 1.0, 1.0, 5.0])}
    commits = [Commit(0, 0, 0, 3, "m0", 2.0), Commit(0, 1, 3, 5, "m0", 9.0)]
    appended, waited = latencies(commits, stamps)
    assert waited.tolist() == [2.0, 2.0, 1.0, 8.0, 4.0]
    latency = window_latency(appended, waited, since=1.0, until=6.0)
    assert latency.records == 3
    assert latency.max_s == 8.0
    assert latency.p50_s == 4.0


def test_the_worst_window_finds_the_dip_and_compares_it_with_the_input_rate() -> None:
    # 10 records/s committed every second for 200 s except nothing from 100 to 130, then a catch-up
    commits = [Commit(0, t, 10 * t, 10 * t + 10, "m0", float(t)) for t in range(200) if not 100 <= t < 130]
    commits.append(Commit(0, 999, 0, 300, "m0", 130.5))
    assert worst_window(commits, rate=10.0, since=0.0, until=199.0) == pytest.approx(30 / 60)


def test_restored_rows_add_up_across_reports_and_restarts() -> None:
    counter = RestoreCounter()
    counter.observe({("pod-a", 0): (100, 0), ("pod-a", 1): (0, 50)})
    counter.observe({("pod-a", 0): (120, 0), ("pod-a", 1): (0, 80)})
    counter.observe({("pod-a", 0): (5, 0)})  # the copy was made again: it starts from zero
    assert (counter.blocking, counter.background) == (125, 80)


def test_a_warmup_promoted_to_active_is_counted_once() -> None:
    """The promoted copy reports its background rows under its new role, as the same replica."""
    counter = RestoreCounter()
    for role in ("warmup", "active"):
        report = {"podUID": "pod-a", "tasks": [{"task": 1, "role": role, "restoredBackground": 32_000}]}
        counter.observe(restore_counts([report]))
    assert (counter.blocking, counter.background) == (0, 32_000)


CALIBRATION = {
    "input_rate_per_task": 10.0,
    "process_rate_per_task": 100.0,
    "restore_rate_per_task": 5_000.0,
    "state_rows_per_task": 30_000,
    "pod_start_s": 20.0,
}


@pytest.mark.parametrize(
    ("phase", "members"),
    [
        ("scale-out", 2),
        ("scale-in", 3),
        ("bounce", 2),
        ("permanent-loss", 2),
        ("permanent-loss-standby", 2),
        ("rolling-restart", 2),
    ],
)
def test_every_measured_phase_becomes_a_valid_calibrated_scenario(phase: str, members: int) -> None:
    from clusterbench.simcompare import scenario_doc
    from streamapp.sim.scenario import parse_scenario

    row = {"phase": phase, "protocol": "streamapp", "members": members, "seconds": 120.0, "victim": 1}
    scenario = parse_scenario(scenario_doc(row, CALIBRATION, partitions=4, delay="60s"))
    assert scenario.members == members
    assert scenario.workload.restore_rate == 5_000.0
    assert scenario.rebalance.standby_replicas == (1 if phase == "permanent-loss-standby" else 0)
    assert len(scenario.events) == 1


def test_the_calibrated_bounce_under_streamapp_predicts_the_sooner_of_return_and_restore(
    tmp_path: Path,
) -> None:
    """A task restores in 6 s where the member is back in 20: the simulator restores the bounced
    member's two tasks elsewhere, each in full, and no task stands still as long as the return."""
    from clusterbench.simcompare import predict, write_scenarios

    row = {"phase": "bounce", "protocol": "streamapp", "members": 2, "seconds": 120.0, "victim": 1}
    (path,) = write_scenarios([row], CALIBRATION, partitions=4, delay="60s", folder=tmp_path)
    predicted = predict(path)
    assert predicted["worst_task_stall_s"] < CALIBRATION["pod_start_s"]
    assert predicted["restored_blocking"] >= 2 * CALIBRATION["state_rows_per_task"]


def test_quiet_stretches_are_common_to_all_apps() -> None:
    """Before the first phase, then from the last app's recovery to the end of each hold."""
    from clusterbench.analysis import quiet
    from clusterbench.runner import Run, Settings, Window

    run = Run(Settings(out=Path("out")), fed_from=10.0)
    run.windows = [
        Window("scale-out", "eager", 3, 30.0, 40.0, 70.0),
        Window("scale-out", "streamapp", 3, 30.0, 50.0, 70.0),
        Window("bounce", "eager", 2, 80.0, None, 100.0),  # never recovered: no quiet in its window
        Window("bounce", "streamapp", 2, 80.0, 85.0, 100.0),
    ]
    assert quiet(run) == [(10.0, 30.0), (50.0, 70.0), (100.0, 100.0)]


def test_the_stall_of_a_move_is_told_apart_from_slowed_batches() -> None:
    # task 0 moves from m0 to m1 with a 3-s gap, then its batches slow to 1.5 s on m1
    task0 = [
        Commit(0, i, i, i + 1, "m0" if at < 3 else "m1", at) for i, at in enumerate([0, 1, 2, 5, 6.5, 8])
    ]
    gaps = phase_gaps(task0, {0: 1.0}, since=1.5, until=8.0)
    assert (gaps.moves_stall_s, gaps.moves) == (2.0, 1)
    assert gaps.stall_s == 3.0
