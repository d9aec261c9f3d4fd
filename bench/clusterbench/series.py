"""Several runs of the cluster benchmark, recorded as each finishes, and what they say together.

One run is noisy on two shared cores: a phase's stall moves by seconds from one run to the next. So the
benchmark runs the whole story several times, each run's raw observations written (gzipped JSON, in the
record's `cluster-runs/`) the moment it ends; a series stopped half-way resumes with the runs it lacks,
and the report is written again after each one from every run on record. Per (scenario, protocol) the
report gives the median and the range over the runs.

The simulator is calibrated on the first run and checked against the others (held out): a calibration
that only reproduced the run it came from would prove nothing.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REGIMES = ("small", "large")
"""The state regimes real executors run here (`runner.Settings`): *small*, a cold restore takes about a
batch (a second or two); *large*, it takes minutes, over twice a pod's start. Each has a series of its
own."""


def run_path(directory: Path, regime: str, number: int) -> Path:
    """Where run `number` (from 1) of the regime's series is recorded."""
    return directory / f"{regime}-{number}.json.gz"


def recorded(directory: Path, regime: str) -> list[Path]:
    """The regime's runs on record, in order."""
    return sorted(
        directory.glob(f"{regime}-*.json.gz"), key=lambda p: int(p.name.split("-")[1].split(".")[0])
    )


def regime_path(path: Path, regime: str) -> Path:
    """A small-regime output's counterpart for `regime` (cluster.md → cluster-large.md, calibrated →
    calibrated-large)."""
    if regime == "small":
        return path
    if path.name.startswith("cluster"):
        return path.with_name(path.name.replace("cluster", f"cluster-{regime}", 1))
    return path.with_name(f"{path.name}-{regime}")


def regime(results: dict[str, Any]) -> str:
    """The regime a derived run ran in (runs recorded before there were two were all small)."""
    return str(results["settings"].get("regime", "small"))


def write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        json.dump(doc, out, separators=(",", ":"))


def read(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as found:
        loaded: dict[str, Any] = json.load(found)
        return loaded


def figures(row: dict[str, Any]) -> dict[str, float]:
    """What the summary keeps of one measured row (`cluster-summary.json`'s run entries)."""
    return {
        "stall_total": row["gaps"]["stall_s"],
        "stall_worst_task": row["gaps"]["worst_task_stall_s"],
        "standstill": row["gaps"].get("standstill_s", 0.0),
        "stall_at_moves": row["gaps"].get("moves_stall_s", 0.0),
        "restored_blocking": row["restored_blocking"],
        "restored_background": row["restored_background"],
    }


def summary(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`cluster-summary.json`: one entry per (scenario, protocol), its figures in every run, and whether
    the protocols ran side by side (every run on record ran all of them at once) or alone."""
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    for results in runs:
        together = len(results["exactly_once"]) > 1
        for row in results["rows"]:
            entry = entries.setdefault(
                (regime(results), row["phase"], row["protocol"]),
                {
                    "scenario": row["phase"],
                    "state": regime(results),
                    "protocol": row["protocol"],
                    "side_by_side": together,
                    "runs": [],
                },
            )
            entry["side_by_side"] = entry["side_by_side"] and together
            entry["runs"].append(figures(row))
    return list(entries.values())


def median(entry: dict[str, Any], key: str) -> float:
    return float(statistics.median(run[key] for run in entry["runs"]))


def spread(entry: dict[str, Any], key: str) -> tuple[float, float]:
    values = [run[key] for run in entry["runs"]]
    return min(values), max(values)


def verdict(entries: Sequence[dict[str, Any]], scenario: str) -> dict[str, Any] | None:
    """Whether `streamapp`'s median total and worst-task stall are no worse than the better baseline's
    by more than 10% or 2 task-seconds (the larger), and by how much."""
    by_protocol = {e["protocol"]: e for e in entries if e["scenario"] == scenario}
    ours = by_protocol.get("streamapp")
    baselines = [by_protocol[p] for p in ("eager", "cooperative") if p in by_protocol]
    if ours is None or not baselines:
        return None
    out: dict[str, Any] = {}
    for key in ("stall_total", "stall_worst_task"):
        best = min(median(b, key) for b in baselines)
        mine = median(ours, key)
        allowed = best + max(2.0, 0.1 * best)
        out[key] = {"streamapp": mine, "best_baseline": best, "allowed": allowed, "ok": mine <= allowed}
    return out


def held_out(
    predicted: dict[tuple[str, str], dict[str, Any]], runs: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The simulator's prediction (calibrated on the first run) against the median of the other runs,
    per (scenario, protocol): the error on the total and the worst task's stall, and on the longest
    stand-still (the simulator's worst task downtime has no slowed batches in it: what it models)."""
    later = runs[1:]
    out = []
    for (scenario, protocol), guess in sorted(predicted.items()):
        measured = [
            figures(row)
            for results in later
            for row in results["rows"]
            if row["phase"] == scenario and row["protocol"] == protocol
        ]
        if not measured:
            continue
        entry: dict[str, Any] = {"scenario": scenario, "protocol": protocol, "held_out_runs": len(measured)}
        pairs = (
            ("stall_total", "stall_s"),
            ("stall_worst_task", "worst_task_stall_s"),
            ("standstill", "standstill_s"),
        )
        for key, predicted_key in pairs:
            actual = float(statistics.median(m[key] for m in measured))
            entry[key] = {
                "predicted": guess[predicted_key],
                "measured": actual,
                "error": relative(guess[predicted_key], actual),
            }
        out.append(entry)
    return out


def relative(predicted: float, measured: float) -> float | None:
    """(predicted − measured) / measured; None when measured is 0."""
    return None if measured == 0 else round((predicted - measured) / abs(measured), 3)
