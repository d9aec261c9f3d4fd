"""The simulator on the measured phases, with rates calibrated from the run; predicted beside measured.

Each measured (phase, protocol) becomes a scenario file: the app's shape when the phase's action
started, the action at t=0, the phase's length as the duration, and the workload the run measured
(`analysis.calibration`), its contention model included: the cores, the apps side by side on them, and
the members the phase before had just restarted. The simulator then counts the stall as the run
measures it — every commit gap's excess over the task's usual cadence, stand-stills and slowed batches
alike (`streamapp.sim.stall`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from streamapp.sim.scenario import load_scenario
from streamapp.sim.simulator import simulate

REPORT_INTERVAL_S = 2.0  # the executor's default --report-interval


def scenario_doc(
    row: dict[str, Any], calibration: dict[str, Any], partitions: int, delay: str
) -> dict[str, Any]:
    """The simulator's scenario for one measured row."""
    phase = row["phase"]
    victim = row.get("victim") or 0
    events: dict[str, dict[str, Any]] = {
        "scale-out": {"at": 0, "scale": 3},
        "scale-in": {"at": 0, "scale": 2},
        "bounce": {"at": 0, "kill": victim, "restartAfter": calibration["pod_start_s"]},
        "permanent-loss": {"at": 0, "kill": victim},
        "permanent-loss-standby": {"at": 0, "kill": victim},
        "rolling-restart": {"at": 0, "rollingRestart": True},
    }
    standby = phase == "permanent-loss-standby"
    return {
        "name": f"{phase} (calibrated)",
        "partitions": partitions,
        "members": row["members"],
        "duration": max(1, round(row["seconds"])),
        "workload": {
            "localState": "claim",
            "inputRate": calibration["input_rate_per_task"],
            "processRate": calibration["process_rate_per_task"],
            "restoreRate": calibration["restore_rate_per_task"],
            "stateRecords": max(1, calibration["state_rows_per_task"]),
            "reportInterval": REPORT_INTERVAL_S,
            "podStartSeconds": calibration["pod_start_s"],
            "reassignSeconds": calibration.get("handoff_s", 0.0),
            "detectSeconds": calibration.get("detect_s" if phase == "bounce" else "detect_deleted_s", 0.0),
            **_pod_starts(calibration),
            **_contention(calibration, f"{phase}/{row['protocol']}"),
        },
        "rebalance": {
            "protocol": row["protocol"],
            "scheduledRebalanceMaxDelay": delay,
            "standbyReplicas": 1 if standby else 0,
            "failoverToStandby": True,
        },
        "events": [events[phase]],
    }


def _pod_starts(calibration: dict[str, Any]) -> dict[str, float]:
    """The start of a new member's pod and of a replaced one, where the run measured them."""
    keys = {"newPodStartSeconds": "new_pod_start_s", "replacedPodStartSeconds": "replaced_pod_start_s"}
    return {key: calibration[name] for key, name in keys.items() if calibration.get(name)}


def _contention(calibration: dict[str, Any], row: str) -> dict[str, Any]:
    """`workload.contention` from the calibration, with the row's members fresh at its start."""
    model = calibration.get("contention")
    if not model:
        return {}
    block: dict[str, Any] = {
        "cores": model["cores"],
        "apps": model["apps"],
        "cadence": model["cadence_s"],
        "stretchPerLoad": model["stretch_per_load"],
        "idleLoad": model["idle_load"],
        "startingLoad": model["starting_load"],
        "freshLoad": model["fresh_load"],
        "restoreLoad": model["restore_load"],
        "freshStretch": model["fresh_stretch"],
        "freshDecaySeconds": model["fresh_decay_s"],
    }
    fresh = model["fresh_at_start"].get(row)
    if fresh:
        block["fresh"] = fresh
    return {"contention": block}


def write_scenarios(
    rows: Sequence[dict[str, Any]], calibration: dict[str, Any], partitions: int, delay: str, folder: Path
) -> list[Path]:
    """One calibrated scenario file per measured row (protocol in the name), written under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for row in rows:
        path = folder / f"{row['phase']}-{row['protocol']}.yaml"
        doc = scenario_doc(row, calibration, partitions, delay)
        path.write_text(
            f"# calibrated from the cluster run (bench/results/cluster.md)\n{yaml.safe_dump(doc)}"
        )
        paths.append(path)
    return paths


def predict(path: Path) -> dict[str, Any]:
    """The simulator's figures for one calibrated scenario, in the measured rows' terms."""
    result, _ = simulate(load_scenario(path))
    return {
        "worst_task_stall_s": result.max_task_stall_seconds,
        "standstill_s": result.longest_stall_seconds,
        "stall_s": result.stall_seconds,
        "restored_blocking": result.blocking_restore_records,
        "restored_background": result.background_restore_records,
        "worst_60s": result.min_window_throughput_ratio,
        "time_to_balance_s": result.time_to_balance_seconds,
    }


def measured_terms(row: dict[str, Any]) -> dict[str, Any]:
    """A measured row's figures under the names `predict` uses."""
    return {
        "worst_task_stall_s": row["gaps"]["worst_task_stall_s"],
        "stall_s": row["gaps"]["stall_s"],
        "standstill_s": row["gaps"].get("standstill_s", 0.0),
        "restored_blocking": row["restored_blocking"],
        "restored_background": row["restored_background"],
        "worst_60s": row["worst_60s"],
        "time_to_balance_s": row["recovered_s"],
    }


def error(predicted: float | None, measured: float | None) -> str:
    """`predicted - measured`, and relative to measured when that is not zero."""
    if predicted is None or measured is None:
        return "—"
    difference = predicted - measured
    if measured == 0:
        return f"{difference:+,.4g}"
    return f"{difference:+,.4g} ({difference / abs(measured):+.0%})"
