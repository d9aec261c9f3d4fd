"""`bench/results/cluster.md` from the run's JSON: machine, settings, measured rows, the simulator's
prediction beside each, the exactly-once check and the plots."""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clusterbench.simcompare import error

SCENARIOS = ("scale-out", "scale-in", "bounce", "permanent-loss", "permanent-loss-standby", "rolling-restart")
PROTOCOLS = ("eager", "cooperative", "streamapp")


def machine() -> dict[str, Any]:
    """nproc, memory, versions: what the figures depend on besides the code."""
    import pyspark

    from localcluster import versions

    meminfo = Path("/proc/meminfo").read_text().splitlines()
    memory_kib = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal"))
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(memory_kib / 2**20, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": java[0] if java else "?",
        "kubernetes": versions.KUBERNETES,
        "etcd": versions.ETCD,
        "commit": commit,
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def measured_table(rows: Sequence[dict[str, Any]], scenario: str) -> str:
    lines = [
        "| protocol | recovered after s | longest gap s (task) | cadence s: usual / in phase | stall s, all tasks "
        "| worst task stall s "
        "| latency p50 / p99 / max s | worst 60 s throughput | restored blocking | restored background |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for protocol in PROTOCOLS:
        for row in rows:
            if row["phase"] == scenario and row["protocol"] == protocol:
                gaps, latency = row["gaps"], row["latency"]
                lines.append(
                    f"| {protocol} | {_fmt(row['recovered_s'])} | {_fmt(gaps['longest_s'])} ({gaps['longest_task']}) "
                    f"| {_fmt(row['usual_gap_s'])} / {_fmt(gaps.get('phase_cadence_s'))} | {_fmt(gaps['stall_s'])} "
                    f"| {_fmt(gaps['worst_task_stall_s'])} "
                    f"| {_fmt(latency['p50_s'])} / {_fmt(latency['p99_s'])} / {_fmt(latency['max_s'])} "
                    f"| {row['worst_60s']:.0%} | {_fmt(row['restored_blocking'])} | {_fmt(row['restored_background'])} |"
                )
    return "\n".join(lines)


COMPARED = (
    ("worst_task_stall_s", "worst task stall s"),
    ("stall_s", "stall s, all tasks"),
    ("restored_blocking", "restored blocking"),
    ("restored_background", "restored background"),
    ("worst_60s", "worst 60 s throughput"),
    ("time_to_balance_s", "recovered / balanced after s"),
)


def comparison_table(rows: Sequence[dict[str, Any]], scenario: str) -> str:
    lines = [
        "| protocol | metric | simulator | measured | error (sim − real) |",
        "|---|---|---:|---:|---:|",
    ]
    for protocol in PROTOCOLS:
        for row in rows:
            if row["phase"] != scenario or row["protocol"] != protocol or "predicted" not in row:
                continue
            for key, label in COMPARED:
                predicted, measured = row["predicted"][key], row["measured_terms"][key]
                lines.append(
                    f"| {protocol} | {label} | {_fmt(predicted)} | {_fmt(measured)} | {error(predicted, measured)} |"
                )
    return "\n".join(lines)


def render(
    results: dict[str, Any], notes: Path | None = None, scenarios: str = "bench/scenarios/calibrated/"
) -> str:
    m, s, cal = results["machine"], results["settings"], results["calibration"]
    out = [
        "# Rebalance benchmark on the local cluster: real executors, measured from outside",
        "",
        f"Produced by `{results['command']}` on {results['date']} (commit {m['commit']}), "
        f"{results['minutes']:.0f} min wall.",
        "",
        f"Machine: {m['nproc']} cores, {m['memory_gib']} GiB RAM, Linux {m['kernel']}, Python {m['python']}, "
        f"pyspark {m['pyspark']}, {m['java']}; Kubernetes {m['kubernetes']} and etcd {m['etcd']} as local "
        f"processes (e2e/localcluster), the operator installed by its Helm chart. Load average at start "
        f"{results['load_start']:.1f}, at end {results['load_end']:.1f} (the machine is shared with other "
        f"sessions' tests: absolute seconds move between runs{_side_by_side(results)}).",
        "",
        "## Set-up",
        "",
        f"{_apps(results)}, each in its own namespace, "
        f"running the sample count (`streamapp.executor.samples.counts`) on real PySpark executors on the "
        f"process node, {s['partitions']} tasks, 2 members between scenarios, every member with a claim "
        f"(`executor.storage.size: 1Gi`), `scheduledRebalanceMaxDelay: {s['delay']}`, everything else "
        f"default. State: before anything is measured each app's input holds the same {s['preload']:,} "
        f"records over {s['keys']:,} keys ({cal['state_rows_per_task']:,} keys per task at the end), and "
        f"each app commits it all; then input flows at {s['rate']:.0f} records/s per app (the same records "
        f"for all three), appended once a second, the record's timestamp being its append time. The phases "
        f"run in this order, every app's action within the same second, each followed by a wait until the "
        f"app has recovered and a hold of {s['hold_s']:.0f} s; the measurement window is the action to the "
        f"end of the hold:",
        "",
        "1. **scale-out** 2 → 3 via `/scale`; 2. **scale-in** 3 → 2;",
        "3. **bounce**: SIGKILL of the busiest member's executor process group (its JVM too); the pod restarts "
        "it in place; the scenario means a return within the delay (whether it was is in the notes below);",
        "4. **permanent-loss**: a ResourceQuota of one pod fewer than exist is created in the app's namespace, "
        "then the busiest member's pod is deleted with no grace period (a node gone): the operator cannot "
        "create it again (the quota refuses it), as when no node has room for it; its claim stays. Scale-in "
        "would not be a loss (the highest id leaves, announced). After the phase the quota is removed and the "
        "member returns (not measured);",
        "5. **permanent-loss-standby**: `standbyReplicas: 1` is set, the run waits until every task has a "
        "standby within `acceptableRecoveryLag` (not measured), then the same loss; afterwards the quota goes "
        "and `standbyReplicas` is back to 0. The engine places standbys only under `streamapp` (eager and "
        "cooperative keep none: `rebalance.engine._drop_copies_off_live_members`), so for those two this is "
        "a second loss without a standby;",
        "6. **rolling-restart**: `executor.image` changed (the process node ignores images, but the pod "
        "template's hash changes, so the operator rolls every member's pod).",
        "",
        "What is measured, all from outside the executors except one: **gaps** between a task's commits, "
        "from the commit manifests' file times on the shared store (a manifest is published once, complete); "
        "*usual gap* is the median over the run with input flowing (the batch cadence), *in phase* the median "
        "gap of all the app's tasks inside the window; *stall* is what every gap longer than twice the "
        "cadence (the usual gap, or the phase's when longer) added beyond it, summed over tasks, and the "
        "worst task's: a task that stood still while the others went on, not an app whose every batch "
        "slowed down on busy cores (that shows in the throughput and the latency). "
        "**Latency**: a record's append time to its batch's manifest, over the records appended in the "
        "window. **Worst 60 s throughput**: the fewest input records committed in any 60 s of the window, "
        "over what arrived in it. **Restored blocking / background**: rows the executors report in their "
        "member status (`restoredBlocking`, `restoredBackground` per copy, sampled every second, summed "
        "across pod restarts): what the executors report, not an outside measurement. *recovered after*: "
        "when the phase's wait ended (settled, every task committing again; the lost member not back).",
        "",
        "Exactly once (each task's committed history and outputs against a reference computed from the "
        "whole input, after input stopped and everything was committed):",
        "",
        *[f"- {protocol}: {text}" for protocol, text in results["exactly_once"].items()],
        "",
    ]
    for scenario in SCENARIOS:
        if not any(r["phase"] == scenario for r in results["rows"]):
            continue
        out += [f"## {scenario}", "", measured_table(results["rows"], scenario), ""]
        out += [f"![{scenario}](cluster-{scenario}.png)", ""]
    out += calibration_section(results, scenarios)
    # What was found out about the recorded run by hand, kept across regenerations.
    if notes is not None and notes.exists():
        out += ["", notes.read_text()]
    return "\n".join(out) + "\n"


def _side_by_side(results: dict[str, Any]) -> str:
    """Why a full run's figures compare: its protocols shared the same moments."""
    if all(p in results["exactly_once"] for p in PROTOCOLS):
        return "; the protocols ran side by side at the same moments, so the comparison between them is the point"
    return ""


def _apps(results: dict[str, Any]) -> str:
    """The apps the run had: all three protocols side by side, or those `--protocol` chose."""
    ran = [p for p in PROTOCOLS if p in results["exactly_once"]]
    if len(ran) == len(PROTOCOLS):
        return "Three apps, one per protocol (" + ", ".join(f"`{p}`" for p in ran) + ")"
    return (
        "One app per protocol run ("
        + ", ".join(f"`{p}`" for p in ran)
        + "; `--protocol` left the others out)"
    )


def calibration_section(results: dict[str, Any], scenarios: str) -> list[str]:
    cal = results["calibration"]
    if not any("predicted" in r for r in results["rows"]):
        return []
    out = [
        "## The simulator against the real run",
        "",
        "The simulator (`streamapp.sim`, the real engine with modelled executors) ran every measured "
        "(scenario, protocol) as its own scenario: the app's shape when the action started, the action at "
        "t = 0, the phase's measured length as the duration, and a workload calibrated from this run "
        f"(files: `{scenarios}`):",
        "",
        f"- input rate {cal['input_rate_per_task']:.1f} records/s per task (the run's);",
        f"- process rate {_fmt(cal['process_rate_per_task'])} records/s per task: the most records per "
        "second any batch committed while input flowed, from its task's previous commit (the biggest "
        "batches follow a stand-still: the backlog in one go; a lower bound of what a task can do);",
        f"- pod start {cal['pod_start_s']:.1f} s: the streamapp bounce's longest gap minus its usual gap "
        "(a restart that restores only the delta: what remains is the pod and executor starting);",
        f"- restore rate {_fmt(cal['restore_rate_per_task'])} rows/s per task: the highest ratio, over "
        "measured rows, of rows restored blocking to stall seconds (a lower bound: a stall also contains "
        "the start of the task);",
        f"- state {cal['state_rows_per_task']:,} rows per task (distinct keys per task of the input);",
        f"- handoff {cal.get('handoff_s', 0.0):.1f} s (`reassignSeconds`, what a task waits each time it "
        "moves): the streamapp scale-out's longest gap minus its usual gap, one planned handoff that "
        "restores nothing while blocking (the round trips through the API server and the new owner's "
        "first batch);",
        f"- batch interval {cal['batch_interval_s']:.1f} s (median usual gap): not a simulator input; it is "
        "what the measured stall subtracts, as the simulator's downtime counts no cadence.",
        "",
    ]
    for scenario in SCENARIOS:
        if any(r["phase"] == scenario and "predicted" in r for r in results["rows"]):
            out += [f"### {scenario}", "", comparison_table(results["rows"], scenario), ""]
    return out


def headline(results: dict[str, Any]) -> str:
    """The figures `bench/RESULTS.md` carries (bench/results/cluster-headline.md, included by
    bench/run.py): per scenario and protocol, the worst task's stall, blocking restore and worst window."""
    s = results["settings"]
    lines = [
        "# On the local cluster: real executors (bench/results/cluster.md)",
        "",
        f"`{results['command']}` on {results['date']}, {results['machine']['nproc']} cores, load average "
        f"{results['load_start']:.0f}–{results['load_end']:.0f} (shared). Three count apps side by side, one "
        f"per protocol, {s['partitions']} tasks, 2 members, {s['rate']:.0f} records/s each, state pre-loaded "
        f"({results['calibration']['state_rows_per_task']:,} keys per task), claims, "
        f"`scheduledRebalanceMaxDelay: {s['delay']}`; measured from the commit manifests (stall: what a task's "
        "commit gaps added beyond the cadence, its usual gap or the app's in the phase when the cores slowed "
        "every batch) and, for restores, from the executors' member status. Full "
        "tables, plots and the simulator's prediction beside each row: [results/cluster.md](results/cluster.md).",
        "",
        "| scenario | protocol | worst task stall s | stall s, all tasks | cadence s: usual / in phase | restored blocking "
        "| restored background | worst 60 s throughput |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for scenario in SCENARIOS:
        for protocol in PROTOCOLS:
            for row in results["rows"]:
                if row["phase"] == scenario and row["protocol"] == protocol:
                    gaps = row["gaps"]
                    lines.append(
                        f"| {scenario} | {protocol} | {_fmt(gaps['worst_task_stall_s'])} | {_fmt(gaps['stall_s'])} "
                        f"| {_fmt(row['usual_gap_s'])} / {_fmt(gaps.get('phase_cadence_s'))} "
                        f"| {_fmt(row['restored_blocking'])} "
                        f"| {_fmt(row['restored_background'])} | {row['worst_60s']:.0%} |"
                    )
    return "\n".join(lines) + "\n"
