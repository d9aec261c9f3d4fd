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

from clusterbench import occupancy, stretchfit
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


def from_files(run: Run) -> dict[str, Any]:
    """What only the run's files tell (its raw record keeps these, not the files): each window's
    latency (from every record's append time), the exactly-once check, the state's size per task."""
    latency: dict[str, dict[str, Any]] = {}
    for app in run.apps:
        appended, waited = latencies(app.commits.commits, stamps_of(app))
        for window in run.windows:
            if window.protocol == app.protocol:
                found = window_latency(appended, waited, window.started, window.ended)
                latency[_key(window)] = {
                    k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(found).items()
                }
    return {
        "latency": latency,
        "exactly_once": {app.protocol: exactly_once(app) for app in run.apps},
        "state_rows": [n for app in run.apps[:1] for n in state_rows(app)],
    }


def _key(window: Window) -> str:
    return f"{window.phase}/{window.protocol}"


def choices(run: Run) -> dict[str, list[list[Any]]]:
    """Each choice for a lost member's tasks an app's status showed within a window, by
    `phase/protocol`, timed from the window's action."""
    out: dict[str, list[list[Any]]] = {}
    for app in run.apps:
        for window in run.windows:
            if window.protocol == app.protocol:
                seen = [
                    [round(at - window.started, 1), *rest]
                    for at, *rest in app.choices
                    if window.started <= at <= window.ended
                ]
                if seen:
                    out[_key(window)] = seen
    return out


def rows(run: Run, latency: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per measured (phase, protocol); `latency` per window, as `from_files` measured it."""
    by_protocol = {app.protocol: app for app in run.apps}
    stretches = quiet(run)
    usual = {
        app.protocol: {p: usual_gap(_fed(app, run), p, stretches) for p in range(app.partitions)}
        for app in run.apps
    }
    return [
        _row(by_protocol[w.protocol], w, usual[w.protocol], latency.get(_key(w), {}), run.settings.rate)
        for w in run.windows
    ]


def quiet(run: Run) -> list[tuple[float, float]]:
    """The stretches in which every app was at rest with input flowing: before the first phase, and
    from the last app's recovery to the end of each phase's hold (`measure`'s usual cadence)."""
    if not run.windows:
        return []
    phases: dict[str, list[Window]] = {}
    for window in run.windows:
        phases.setdefault(window.phase, []).append(window)
    stretches = [(run.fed_from, min(w.started for w in run.windows))]
    for windows in phases.values():
        stretches.append((max(w.recovered or w.ended for w in windows), max(w.ended for w in windows)))
    return stretches


def _fed(app: BenchApp, run: Run) -> list[Any]:
    """Commits while input flowed at the rate (the pre-load's catch-up has another cadence)."""
    return [c for c in app.commits.commits if run.fed_from <= c.at <= run.fed_until]


def _row(
    app: BenchApp, window: Window, usual: dict[int, float], latency: dict[str, Any], rate: float
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
        "latency": latency,
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


def calibration(
    run: Run, measured: Sequence[dict[str, Any]], rows_per_task: Sequence[int], cores: int
) -> dict[str, Any]:
    """The simulator's workload rates and contention model, derived from this run (see the report for
    each one's source); `cores` is how many the executors shared."""
    settings = run.settings
    by_protocol = {(r["protocol"], r["phase"]): r for r in measured}
    # a bounce waited out: the cooperative protocol's tasks stand still for the pod's restart (Spark
    # start, warm-up round) and nothing else (streamapp's may be restored elsewhere sooner)
    bounce = by_protocol.get(("cooperative", "bounce")) or by_protocol.get(("streamapp", "bounce"))
    pod_start = bounce["gaps"]["longest_s"] - bounce["usual_gap_s"] if bounce else 20.0
    process_rate = max((_batch_rate(app, run) for app in run.apps), default=0.0)
    reported = [rate for app in run.apps for rate in app.restore_rates]
    candidates = [
        r["restored_blocking"] / r["gaps"]["stall_s"]
        for r in measured
        if r["restored_blocking"] > 0 and r["gaps"]["stall_s"] > 0
    ]
    restore_rate = statistics.median(reported) if reported else max(candidates) if candidates else None

    # one handoff's wait between two running members, as the simulator charges it to each move: the mean
    # excess over the cadence of the gaps across a change of owner in the scale-in, every protocol's
    # whose moves restored less than a second's worth while blocking (warm or nearly). Not the
    # scale-out's moves: their new member's first batches are slow as well, which the contention model
    # takes (a fresh executor's stretch), and counted twice they made every move after a loss cost the
    # simulator twice what it measured. Not the phases' summed stall (every batch slowed by a new JVM).
    def warm(row: dict[str, Any]) -> bool:
        blocking = row["restored_blocking"]
        return blocking == 0 or (restore_rate is not None and blocking < restore_rate)

    handed = [r for r in measured if r["phase"] == "scale-in" and warm(r)]
    excess = sum(r["gaps"].get("moves_stall_s", 0.0) for r in handed)
    moves = sum(r["gaps"].get("moves", 0) for r in handed)
    handoff = excess / moves if moves else 0.0
    found = [s for app in run.apps for s in occupancy.stretches(app)]
    cadence = statistics.median(r["usual_gap_s"] for r in measured) if measured else 1.0
    return {
        "input_rate_per_task": settings.rate / settings.partitions,
        "batch_interval_s": cadence,
        "process_rate_per_task": round(process_rate, 1),
        "pod_start_s": round(max(pod_start, 1.0), 1),
        "restore_rate_per_task": round(restore_rate, 1) if restore_rate else None,
        "restore_rate_reported": bool(reported),
        "state_rows_per_task": round(statistics.mean(rows_per_task)) if rows_per_task else 0,
        "handoff_s": round(handoff, 1),
        # how long after a SIGKILL the operator showed the member lost: the kubelet noticing, the pod's
        # Ready condition, the operator's watch and reconcile
        "detect_s": round(_noticed(run, ("bounce",)), 1),
        # and after a pod deleted outright: its watch sees the deletion
        "detect_deleted_s": round(_noticed(run, ("permanent-loss", "permanent-loss-standby")), 1),
        **_pod_starts(run, found, handoff),
        "contention": _contention(run, found, cores, cadence),
    }


def _noticed(run: Run, phases: Sequence[str]) -> float:
    """How long after the action of `phases` the app's status first showed the victim lost: the
    quickest of the apps (0 when none showed it)."""
    noticed = [
        at - window.started
        for window in run.windows
        if window.phase in phases
        for app in run.apps
        if app.protocol == window.protocol
        for at, member in app.noticed
        if member == window.victim and window.started <= at <= window.ended
    ]
    return min(noticed) if noticed else 0.0


# The phase whose pods start each way, as the simulator's events start them (`scale`: new, `kill` with
# `restartAfter`: restarted, a rollout: replaced)
_STARTED_BY = {"new": "scale-out", "replaced": "rolling-restart"}


def _pod_starts(run: Run, found: Sequence[occupancy.Stretch], handoff: float) -> dict[str, float | None]:
    """How long a new member's pod and a replaced pod took to start: the median of the cooperative
    app's starting stretches of that kind in the phase that starts them (its tasks wait for the pod;
    the other protocols hand them off first). A new member's first commit also waited for the task
    handed to it (`handoff`), which the simulator adds on its own."""
    out: dict[str, float | None] = {}
    for kind, phase in _STARTED_BY.items():
        window = next((w for w in run.windows if w.phase == phase and w.protocol == "cooperative"), None)
        took = [
            s.until - s.since
            for s in found
            if window is not None
            and s.protocol == "cooperative"
            and s.state == "starting"
            and s.kind == kind
            and window.started - 1 <= s.since <= window.ended
        ]
        less = handoff if kind == "new" else 0.0
        start = statistics.median(took) - less if took else 0.0
        # A start no longer than the handoff is no measure of it (the pod was ready before its task came;
        # the large run at 2881aa9 gave -2.2 s): the simulator keeps its podStartSeconds then.
        out[f"{kind}_pod_start_s"] = round(start, 1) if start > 0 else None
    return out


def _contention(run: Run, found: Sequence[occupancy.Stretch], cores: int, cadence: float) -> dict[str, Any]:
    """The contention model fitted to every member's batches of the run (`stretchfit`), the apps that
    shared the cores, the tasks' `cadence`, and each measured row's members that had started recently
    when its action came (the phase before had just restarted them): the simulated app starts from
    the same."""
    fitted = stretchfit.fit(stretchfit.observations(run, found, quiet(run)), cores)
    horizon = 5 * fitted.fresh_decay_seconds  # by then a fresh executor's stretch is below 1% of it
    fresh: dict[str, list[dict[str, Any]]] = {}
    for window in run.windows:
        recent = [
            s
            for s in found
            if s.protocol == window.protocol
            and s.state == "running"
            and s.since <= window.started <= s.until
            and window.started - s.since < horizon
        ]
        fresh[_key(window)] = [
            {"member": s.member, "readyBefore": round(window.started - s.since, 1), "start": s.kind}
            for s in sorted(recent, key=lambda s: s.member)
        ]
    return {
        "cores": cores,
        "apps": len(run.apps),
        "cadence_s": cadence,
        "stretch_per_load": round(fitted.stretch_per_load, 4),
        "idle_load": round(fitted.idle_load, 2),
        "starting_load": {kind: round(value, 2) for kind, value in fitted.starting_load.items()},
        "fresh_load": round(fitted.fresh_load, 2),
        "restore_load": 0.0,
        "fresh_stretch": {kind: round(value, 3) for kind, value in fitted.fresh_stretch.items()},
        "fresh_decay_s": fitted.fresh_decay_seconds,
        "fitted_stretches": fitted.stretches,
        "fitted_bin_s": stretchfit.BIN_S,
        "fitted_task_seconds": round(fitted.task_seconds),
        "fresh_at_start": fresh,
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
