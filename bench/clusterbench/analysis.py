"""From what the run saw to the figures of the report: per phase and protocol, plus the calibration.

The rows are plain dicts (the JSON the report and the simulator comparison read), so a report can be
written again, or compared with another simulator version, without running the cluster again.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
from dataplane_checks import check_partition

from clusterbench.apps import BenchApp
from clusterbench.measure import latencies, phase_gaps, usual_gap, window_latency, worst_window
from clusterbench.runner import Run, Window


def stamps_of(app: BenchApp) -> dict[int, np.ndarray]:
    """Every input record's append time (epoch seconds), by partition and offset."""
    out = {}
    for partition in range(app.partitions):
        column = app.log.read_arrow(partition).column("timestamp").cast("int64").to_numpy()
        out[partition] = column.astype(np.float64) / 1e6
    return out


def exactly_once(app: BenchApp) -> str:
    """Each task's committed history and outputs against the reference computed from the input."""
    batches = records = 0
    for partition in range(app.partitions):
        try:
            batches += check_partition(app.state, app.root / "outputs", app.log, partition)
        except AssertionError as error:
            return f"FAILED on task {partition}: {error}"
        records += app.log.end_offset(partition)
    return f"ok: {records:,} records, {batches:,} batches"


def state_rows(app: BenchApp) -> list[int]:
    """Distinct keys per task at the end: the rows of its state a full restore loads."""
    return [len(app.log.read_arrow(partition).column("key").unique()) for partition in range(app.partitions)]


def rows(run: Run) -> list[dict[str, Any]]:
    """One row per measured (phase, protocol)."""
    by_protocol = {app.protocol: app for app in run.apps}
    out = []
    prepared = {}
    for app in run.apps:
        usual = {p: usual_gap(_fed(app, run), p) for p in range(app.partitions)}
        prepared[app.protocol] = (usual, *latencies(app.commits.commits, stamps_of(app)))
    for window in run.windows:
        app = by_protocol[window.protocol]
        usual, appended, waited = prepared[window.protocol]
        out.append(_row(app, window, usual, appended, waited, run.settings.rate))
    return out


def _fed(app: BenchApp, run: Run) -> list[Any]:
    """Commits while input flowed at the rate (the pre-load's catch-up has another cadence)."""
    return [c for c in app.commits.commits if run.fed_from <= c.at <= run.fed_until]


def _row(
    app: BenchApp,
    window: Window,
    usual: dict[int, float],
    appended: np.ndarray,
    waited: np.ndarray,
    rate: float,
) -> dict[str, Any]:
    since, until = window.started, window.ended
    gaps = phase_gaps(app.commits.commits, usual, since, until)
    restored = _restored_between(app, since, until)
    return {
        "phase": window.phase,
        "protocol": window.protocol,
        "members": window.members,
        "victim": window.victim,
        "seconds": round(until - since, 1),
        "recovered_s": None if window.recovered is None else round(window.recovered - since, 1),
        "usual_gap_s": round(statistics.median(usual.values()), 2),
        "gaps": {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(gaps).items()},
        "latency": {
            k: round(v, 2) if isinstance(v, float) else v
            for k, v in asdict(window_latency(appended, waited, since, until)).items()
        },
        "worst_60s": round(worst_window(app.commits.commits, rate, since, until), 3),
        "restored_blocking": restored[0],
        "restored_background": restored[1],
    }


def _restored_between(app: BenchApp, since: float, until: float) -> tuple[int, int]:
    """The executors' restore counters' growth between two moments (the samples nearest them)."""
    samples = app.restore_samples
    before = max((s for s in samples if s[0] <= since), default=(since, 0, 0))
    after = max((s for s in samples if s[0] <= until), default=(until, 0, 0))
    return after[1] - before[1], after[2] - before[2]


def calibration(run: Run, measured: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The simulator's workload rates, derived from this run (see the report for each one's source)."""
    settings = run.settings
    streamapp = {r["phase"]: r for r in measured if r["protocol"] == "streamapp"}
    bounce = streamapp.get("bounce")
    # the bounced tasks stand still for the pod's restart (Spark start, warm-up round) and nothing else
    pod_start = bounce["gaps"]["longest_s"] - bounce["usual_gap_s"] if bounce else 20.0
    process_rate = max((_batch_rate(app, run) for app in run.apps), default=0.0)
    candidates = [
        r["restored_blocking"] / r["gaps"]["stall_s"]
        for r in measured
        if r["restored_blocking"] > 0 and r["gaps"]["stall_s"] > 0
    ]
    rows_per_task = [n for app in run.apps[:1] for n in state_rows(app)]
    scale_out = streamapp.get("scale-out")
    # one planned handoff's wait, as the simulator charges it to each move: the streamapp scale-out's
    # longest gap beyond the cadence (it restores nothing while blocking). Not the phase's summed stall,
    # which also holds the fresh executor's slower batches after the handoff
    handoff = scale_out["gaps"]["longest_s"] - scale_out["usual_gap_s"] if scale_out else 0.0
    return {
        "input_rate_per_task": settings.rate / settings.partitions,
        "batch_interval_s": statistics.median(r["usual_gap_s"] for r in measured) if measured else 1.0,
        "process_rate_per_task": round(process_rate, 1),
        "pod_start_s": round(max(pod_start, 1.0), 1),
        "restore_rate_per_task": round(max(candidates), 1) if candidates else None,
        "state_rows_per_task": round(statistics.mean(rows_per_task)) if rows_per_task else 0,
        "handoff_s": round(handoff, 1),
    }


def _batch_rate(app: BenchApp, run: Run) -> float:
    """The most records per second any batch of a task committed while input flowed, counting from
    the task's previous commit (so each is a lower bound of what the task can do): the biggest come
    right after a stand-still, when the backlog is processed in one go."""
    best = 0.0
    for partition in range(app.partitions):
        mine = sorted((c for c in _fed(app, run) if c.partition == partition), key=lambda c: c.at)
        for earlier, later in itertools.pairwise(mine):
            if later.at > earlier.at:
                best = max(best, (later.end - later.start) / (later.at - earlier.at))
    return best
