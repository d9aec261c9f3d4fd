"""`bench/results/cluster.md` from the run's JSON: machine, settings, measured rows, the simulator's
prediction beside each, the exactly-once check and the plots."""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clusterbench.series import median, regime, spread, verdict
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
    if isinstance(value, float) and value.is_integer() and abs(value) >= 100:
        return f"{int(value):,}"  # a count (rows), whatever a median made of it
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
    ("standstill_s", "stand-still s"),
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
    runs: Sequence[dict[str, Any]],
    summary: Sequence[dict[str, Any]],
    held_out: Sequence[dict[str, Any]],
    notes: Path | None = None,
    scenarios: str = "bench/scenarios/calibrated/",
) -> str:
    """The report of a series: every run's set-up and exactly-once check, per scenario the medians and
    ranges over the runs and whether `streamapp` kept within the better baseline, run 1's full table
    and plot, the simulator calibrated on run 1 against the others, and the notes."""
    first = runs[0]
    m, s, cal = first["machine"], first["settings"], first["calibration"]
    large = regime(first) == "large"
    out = [
        "# Rebalance benchmark on the local cluster: real executors, measured from outside"
        + (", large state" if large else ""),
        "",
        f"{len(runs)} run(s) of `{first['command']}`, recorded in `bench/results/cluster-runs/` (raw "
        "observations, gzipped) and written into this report by `bench/cluster.py --report` "
        "(`make bench-cluster-report`): every figure below regenerates from them.",
        "",
        *[
            f"- run {n}: {r['date']}, {r['minutes']:.0f} min, load average "
            f"{r['load_start']:.1f} at the start and {r['load_end']:.1f} at the end"
            + (f", commit {r['machine']['commit']}" if r["machine"].get("commit") else "")
            for n, r in enumerate(runs, 1)
        ],
        "",
        f"Machine: {m['nproc']} cores, {m['memory_gib']} GiB RAM, Linux {m['kernel']}, Python {m['python']}, "
        f"pyspark {m['pyspark']}, {m['java']}; Kubernetes {m['kubernetes']} and etcd {m['etcd']} as local "
        f"processes (e2e/localcluster), the operator installed by its Helm chart. The machine is shared "
        f"with other work: absolute seconds move between runs{_side_by_side(first)}.",
        "",
        "## Set-up",
        "",
        f"{_apps(first)}, each in its own namespace, "
        f"running the sample count (`streamapp.executor.samples.counts`) on real PySpark executors on the "
        f"process node, {s['partitions']} tasks, 2 members between scenarios, every member with a claim "
        f"(`executor.storage.size: 1Gi`), `scheduledRebalanceMaxDelay: {s['delay']}`, everything else "
        f"default (`lostTaskRecovery: auto` under `streamapp`){_flaps(s)}{_retention(s)}. State ({_regime_words(first)}): before "
        f"anything is measured each app's input holds the same "
        f"{s['preload']:,} records over {s['keys']:,} keys ({cal['state_rows_per_task']:,} keys per task at "
        f"the end), and each app commits it all; then input flows at {s['rate']:.0f} records/s per app (the "
        f"same records for all three), appended once a second, the record's timestamp being its append "
        f"time. The phases run in this order, every app's action within the same second, each followed by a "
        f"wait until the app has recovered and a hold of {s['hold_s']:.0f} s; the measurement window is the "
        f"action to the end of the hold:",
        "",
        *PHASES,
        "",
        _store(first),
        "",
        *MEASURED,
        "",
        "Exactly once (each task's committed history and outputs against a reference computed from the "
        "whole input, after input stopped and everything was committed):",
        "",
        *[
            f"- run {n}, {protocol}: {text}"
            for n, r in enumerate(runs, 1)
            for protocol, text in r["exactly_once"].items()
        ],
        "",
    ]
    for scenario in SCENARIOS:
        if not any(e["scenario"] == scenario for e in summary):
            continue
        out += [
            f"## {scenario}",
            "",
            summary_table(summary, scenario),
            "",
            verdict_line(summary, scenario),
            "",
        ]
        out += ["Run 1 in full:", "", measured_table(first["rows"], scenario), ""]
        out += choices_section(runs, scenario)
        out += [f"![{scenario}]({plot_name(first, scenario)})", ""]
    out += calibration_section(first, held_out, scenarios)
    if notes is not None and notes.exists():
        out += ["", notes.read_text()]
    return "\n".join(out) + "\n"


PHASES = [
    "1. **scale-out** 2 → 3 via `/scale`; 2. **scale-in** 3 → 2;",
    "3. **bounce**: SIGKILL of the busiest member's executor process group (its JVM too); the pod restarts "
    "it in place;",
    "4. **permanent-loss**: a ResourceQuota of one pod fewer than exist is created in the app's namespace, "
    "then the busiest member's pod is deleted with no grace period (a node gone): the operator cannot "
    "create it again (the quota refuses it), as when no node has room for it; its claim stays. After the "
    "phase the quota is removed and the member returns (not measured);",
    "5. **permanent-loss-standby**: `standbyReplicas: 1` is set, the run waits until every task has a "
    "standby within `acceptableRecoveryLag` (not measured), then the same loss; afterwards the quota goes "
    "and `standbyReplicas` is back to 0. The engine places standbys only under `streamapp`, so for eager "
    "and cooperative this is a second loss without a standby;",
    "6. **rolling-restart**: `executor.image` changed (the process node ignores images, but the pod "
    "template's hash changes, so the operator rolls every member's pod).",
]

MEASURED = [
    "What is measured, all from outside the executors except the restores: **gaps** between a task's "
    "commits, from the commit manifests' file times on the shared store (a manifest is published once, "
    "complete); a task's *cadence* is its median gap in the run's quiet stretches (the steady input "
    "before the first phase and each phase's hold after every app recovered: the same moments for all "
    "apps, where a median over the whole run would depend on the protocol measured). **Stall**: every "
    "gap's excess over its task's cadence, summed over the window's gaps — over all tasks (*stall, all "
    "tasks*, task-seconds), the part of it in gaps across a change of owner (*of which at moves*: what "
    "the moves themselves cost; the rest is batches slowed or held where they were) and for the task "
    "that stalled most (*worst task*). No threshold: a stand-still "
    "counts whole, and so does a phase in which every batch slowed down (the app's median gap in the "
    "phase is shown beside it in run 1's table). **Latency**: a record's append time to its batch's "
    "manifest. **Worst 60 s throughput**: the fewest input records committed in any 60 s of the window, "
    "over what arrived in it. **Restored blocking / background**: rows the executors report in their "
    "member status (`restoredBlocking`, `restoredBackground` per copy, sampled every second, summed "
    "across pod restarts). *recovered after*: when the phase's wait ended.",
]


# (summary key, column) of the median tables, in order
SUMMARY_COLUMNS = (
    ("stall_total", "stall s, all tasks"),
    ("stall_at_moves", "of which at moves"),
    ("stall_worst_task", "worst task stall s"),
    ("restored_blocking", "restored blocking"),
    ("restored_background", "restored background"),
)


def _median_cells(entry: dict[str, Any]) -> str:
    """The SUMMARY_COLUMNS of one (scenario, protocol), each as median [min–max]."""
    cells = []
    for key, _ in SUMMARY_COLUMNS:
        low, high = spread(entry, key)
        cells.append(f"{_fmt(median(entry, key))} [{_fmt(low)}–{_fmt(high)}]")
    return " | ".join(cells)


def _flaps(settings: dict[str, Any]) -> str:
    """The damping of flapping members, when the run set it (`runner.Settings.flap_window`)."""
    if settings.get("flap_window") is None:
        return ""
    return (
        f" but `flapWindow: {settings['flap_window']}`: the phases follow one another within minutes, so a member lost in the "
        "bounce and again in the permanent loss would count as flapping and the later scenarios would "
        "measure the damping (the simulator's `flapping` scenarios measure it)"
    )


def _retention(settings: dict[str, Any]) -> str:
    """The apps' delta retention, when the run set it (`runner.Settings.delta_retention`)."""
    if settings.get("delta_retention") is None:
        return ""
    return (
        f", and `stateStore.deltaRetention: {settings['delta_retention']}`, which is also how long a member "
        "keeps local state of a task that left it: a survivor keeping copies from the phases before would "
        "replay only what it missed, and no loss would weigh waiting against a cold restore"
    )


def plot_name(results: dict[str, Any], scenario: str) -> str:
    """The file of a scenario's plot (run 1's), beside the report."""
    return f"cluster-large-{scenario}.png" if regime(results) == "large" else f"cluster-{scenario}.png"


def _regime_words(results: dict[str, Any]) -> str:
    s, cal = results["settings"], results["calibration"]
    if regime(results) != "large":
        return "the *small* regime: a cold restore takes about a batch"
    restore = _cold_restore_s(results)
    return (
        f"the *large* regime: a cold restore of a task takes about {_fmt(restore)} s against a pod start of "
        f"{_fmt(cal['pod_start_s'])} s; each member keeps its tasks' state in `{s.get('local_store')}`"
    )


def _cold_restore_s(results: dict[str, Any]) -> float | None:
    """A task's full restore at the reported rate: its rows over the median rate the executors reported."""
    cal = results["calibration"]
    rate = cal.get("restore_rate_per_task")
    return cal["state_rows_per_task"] / rate if rate else None


def _store(results: dict[str, Any]) -> str:
    """Where each app's shared state lives, and why there."""
    s = results["settings"]
    if regime(results) != "large":
        return (
            "The shared store is a directory on the host (`file://`), so a restore is bounded by the CPU "
            "and takes about a batch here. *The large regime*, where a cold restore takes minutes, runs as "
            "a series of its own: [cluster-large.md](cluster-large.md)."
        )
    return (
        "**The shared store is the real S3 server behind a slow link.** In a cluster a cold restore is "
        "bounded by the network to the object store; so each app's store is a bucket on its own SeaweedFS "
        "S3 server (`weed mini`), run in a network namespace of its own joined to the host by a veth pair, "
        f"and its replies to the executors are limited to {s['link_kbit']:,} kbit/s by `tc` "
        "(`bench/clusterbench/shapedlink.py`: htb, the rate shared fairly by 64 queues chosen by the "
        "client's port, so a commit's small reply does not wait behind a restore's download). The apps "
        "do not share a link, only the cores. Uploads are not limited. The limit holds from the end of "
        "the pre-load, once every task has its first snapshot (each owner builds its snapshots from the "
        "segments in the store, so the pre-load's changelog crosses the link once more), to the end of "
        "the run, but for the unmeasured set-up phases between scenarios. The benchmark reads the store on "
        "an unshaped address of the same server, so watching it costs the executors nothing; a commit's "
        "time is the one its writer recorded in the manifest (`committed_at`, taken just before the "
        "create), as the object store's modification times are whole seconds."
    )


def choices_section(runs: Sequence[dict[str, Any]], scenario: str) -> list[str]:
    """What `streamapp`'s engine chose for a lost member's tasks in this scenario, run by run: the
    Events the operator posted (its choice with the figures behind it, and each takeover)."""
    lines = [
        f"| {number} | {at:+.1f} | {reason} | {message} |"
        for number, results in enumerate(runs, 1)
        for at, reason, message in results.get("choices", {}).get(f"{scenario}/streamapp", [])
    ]
    if not lines:
        return []
    return [
        "The engine's choices for the lost member's tasks under `streamapp`, as its Events said them "
        "(*at*: seconds after the action):",
        "",
        "| run | at s | Event | message |",
        "|---:|---:|---|---|",
        *lines,
        "",
    ]


def summary_table(summary: Sequence[dict[str, Any]], scenario: str) -> str:
    """Median [min–max] over the runs, per protocol."""
    lines = [
        "| protocol | runs | ran | " + " | ".join(label for _, label in SUMMARY_COLUMNS) + " |",
        "|---|---:|---|" + "---:|" * len(SUMMARY_COLUMNS),
    ]
    for protocol in PROTOCOLS:
        for entry in summary:
            if entry["scenario"] == scenario and entry["protocol"] == protocol:
                ran = "side by side" if entry["side_by_side"] else "alone"
                lines.append(f"| {protocol} | {len(entry['runs'])} | {ran} | {_median_cells(entry)} |")
    return "\n".join(lines)


def verdict_line(summary: Sequence[dict[str, Any]], scenario: str) -> str:
    """Whether `streamapp` kept within the better baseline (10% or 2 task-seconds), in words."""
    found = verdict(summary, scenario)
    if found is None:
        return ""
    parts = []
    for key, label in (("stall_total", "total stall"), ("stall_worst_task", "worst task's stall")):
        v = found[key]
        state = "within" if v["ok"] else "**beyond**"
        parts.append(
            f"{label} {_fmt(v['streamapp'])} s against the better baseline's {_fmt(v['best_baseline'])} s: "
            f"{state} the allowance ({_fmt(v['allowed'])} s)"
        )
    return "`streamapp` (medians): " + "; ".join(parts) + "."


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


def calibration_section(
    results: dict[str, Any], held_out: Sequence[dict[str, Any]], scenarios: str
) -> list[str]:
    """The simulator calibrated on run 1: its inputs, its prediction beside run 1 in full, and against
    the median of the other runs (held out) for the stalls."""
    cal = results["calibration"]
    if not any("predicted" in r for r in results["rows"]):
        return []
    rate_source = (
        "the median `restoreRate` the executors reported in their member status"
        if cal.get("restore_rate_reported")
        else "the highest ratio, over measured rows, of rows restored blocking to stall seconds (no "
        "executor reported a rate: a lower bound)"
    )
    out = [
        "## The simulator against the real runs",
        "",
        "The simulator (`streamapp.sim`, the real engine with modelled executors) ran every measured "
        "(scenario, protocol) as its own scenario: the app's shape when the action started, the action at "
        "t = 0, the phase's measured length as the duration, and a workload calibrated from **run 1** "
        f"(files: `{scenarios}`):",
        "",
        f"- input rate {cal['input_rate_per_task']:.1f} records/s per task (the run's);",
        f"- process rate {_fmt(cal['process_rate_per_task'])} records/s per task: the most records per "
        "second any batch committed while input flowed, from its task's previous commit (a lower bound of "
        "what a task can do);",
        f"- pod start {cal['pod_start_s']:.1f} s: the cooperative bounce's longest gap minus its cadence (it "
        "waits for the pod, which restores only the delta: what remains is the pod and executor starting);",
        f"- restore rate {_fmt(cal['restore_rate_per_task'])} rows/s per task: {rate_source};",
        f"- state {cal['state_rows_per_task']:,} rows per task (distinct keys per task of the input);",
        f"- handoff {cal.get('handoff_s', 0.0):.1f} s (`reassignSeconds`, what a task waits each time it "
        "moves between running members): the mean excess over the cadence of the gaps across a change of "
        "owner in the scale-in, every protocol's whose moves restored under a second's worth while blocking "
        "(a move to a new member also meets its fresh executor's slow first batches: the contention model's);",
        f"- detection {cal.get('detect_s', 0.0):.1f} s (`detectSeconds`) in the bounce: how long after the "
        "SIGKILL the app's status first showed the member lost (the quickest of the apps; polled every "
        f"second); {cal.get('detect_deleted_s', 0.0):.1f} s in the permanent losses, the same after the "
        "pod's deletion (the operator's watch sees a deletion at once; the kubelet must notice a SIGKILL);",
        *_pod_start_lines(cal),
        *_contention_lines(cal),
        "",
    ]
    if held_out:
        out += [
            "### Held out: the prediction against the other runs",
            "",
            "Calibrated on run 1, checked against the median of the runs after it, in the measured terms: "
            "the simulator counts every tick a task did not process and, with the contention model, the "
            "share of its processing time its slowed batches lost; the *stand-still* is the longest single "
            "gap's excess over the cadence (the simulator's: its longest time without processing plus the "
            "slowed batch that ended it).",
            "",
            held_out_verdict(held_out),
            "",
            "| scenario | protocol | held-out runs | stall s: predicted / measured / error "
            "| worst task s: predicted / measured / error | stand-still s: predicted / measured / error |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for entry in held_out:
            cells = []
            for key in ("stall_total", "stall_worst_task", "standstill"):
                e = entry[key]
                err = "—" if e["error"] is None else f"{e['error']:+.0%}"
                cells.append(f"{_fmt(e['predicted'])} / {_fmt(e['measured'])} / {err}")
            out.append(
                f"| {entry['scenario']} | {entry['protocol']} | {entry['held_out_runs']} | {' | '.join(cells)} |"
            )
        out.append("")
    for scenario in SCENARIOS:
        if any(r["phase"] == scenario and "predicted" in r for r in results["rows"]):
            out += [f"### {scenario}, run 1", "", comparison_table(results["rows"], scenario), ""]
    return out


def _pod_start_lines(cal: dict[str, Any]) -> list[str]:
    """The pod starts by kind, where the run measured them."""
    lines = []
    if cal.get("new_pod_start_s"):
        lines.append(
            f"- a new member's pod {cal['new_pod_start_s']:.1f} s (`newPodStartSeconds`): the cooperative "
            "app's new member in the scale-out, from the action to its first commit, less the handoff of "
            "the task it was given (its pod, a claim never used, Spark starting beside the others' new "
            "members);"
        )
    if cal.get("replaced_pod_start_s"):
        lines.append(
            f"- a replaced pod {cal['replaced_pod_start_s']:.1f} s (`replacedPodStartSeconds`): the median "
            "of the cooperative app's members in the rolling restart, from their last commit to their first "
            "again (its tasks wait for each pod: the old one's termination, the new one's start);"
        )
    return lines


def _contention_lines(cal: dict[str, Any]) -> list[str]:
    """The contention model's parameters and where each comes from (`clusterbench.stretchfit`)."""
    model = cal.get("contention")
    if not model:
        return []
    starting = ", ".join(f"{kind} {value:.2f}" for kind, value in model["starting_load"].items())
    fresh = ", ".join(f"{kind} {value:.2f}" for kind, value in model["fresh_stretch"].items())
    recent = sum(1 for members in model["fresh_at_start"].values() if members)
    horizon = 5 * model["fresh_decay_s"]
    return [
        f"- CPU contention (`workload.contention`, docs/simulator.md): {model['apps']} apps side by side "
        f"on {model['cores']} cores, each task's cadence {model['cadence_s']:.2f} s (the median usual gap). "
        f"Fitted to every member's batches over the whole of run 1 — {model['fitted_stretches']:,} "
        f"{model['fitted_bin_s']:.0f}-s stretches, {model['fitted_task_seconds']:,} task-seconds, each "
        "member's gaps beyond its tasks' cadence against what ran on the cores then (members running, "
        "pods starting, from its commits' owners and the phases' events) — by least squares on the "
        "stall share: a batch gap stretches by "
        f"{model['stretch_per_load']:.4f} per busy executor a core beyond {model['idle_load']:.2f}; a pod "
        f"starting weighs ({starting}) executors by how it started, an executor that just started "
        f"{1 + model['fresh_load']:.2f}, its own batches stretch by ({fresh}) more, both decaying with "
        f"{model['fresh_decay_s']:.0f} s; restores 0 (in this regime a restore takes a tenth of a second: "
        f"nothing to fit). The {recent} scenarios whose phase began less than {horizon:.0f} s after a "
        "member's executor started (the phase before restarted it) start with it as fresh as it was in "
        "run 1.",
    ]


def held_out_verdict(held_out: Sequence[dict[str, Any]], least: float = 5.0, within: float = 0.25) -> str:
    """Whether the prediction is within `within` of the held-out median on the total stall of every
    row whose measured stall is at least `least` task-seconds, and which rows are not."""
    rows = [e for e in held_out if e["stall_total"]["measured"] >= least]
    beyond = [e for e in rows if e["stall_total"]["error"] is None or abs(e["stall_total"]["error"]) > within]
    text = (
        f"Total stall within {within:.0%} of the held-out median on {len(rows) - len(beyond)} of the "
        f"{len(rows)} rows of {least:.0f} task-seconds or more"
    )
    if not beyond:
        return text + "."
    listed = "; ".join(f"{e['scenario']} {e['protocol']} {e['stall_total']['error']:+.0%}" for e in beyond)
    return f"{text}; beyond: {listed}."


def headline(runs: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]]) -> str:
    """The figures `bench/RESULTS.md` carries (bench/results/cluster-headline.md, included by
    bench/run.py): per scenario and protocol, the median and range of the stalls and restores."""
    first = runs[0]
    s = first["settings"]
    name = "cluster-large.md" if regime(first) == "large" else "cluster.md"
    lines = [
        f"# On the local cluster: real executors, {regime(first)} state (bench/results/{name})",
        "",
        f"{len(runs)} run(s) of `{first['command']}`, {first['machine']['nproc']} cores, shared. Three count "
        f"apps side by side, one per protocol, {s['partitions']} tasks, 2 members, {s['rate']:.0f} records/s "
        f"each, state pre-loaded ({first['calibration']['state_rows_per_task']:,} keys per task; "
        f"{_regime_words(first)}), claims, `scheduledRebalanceMaxDelay: {s['delay']}`; stall: every commit "
        "gap's excess over its task's cadence, summed; restores from the executors' member status. Median "
        "[min–max] over the runs. Full tables, plots and the simulator beside each row: "
        f"[results/{name}](results/{name}).",
        "",
        "| scenario | protocol | " + " | ".join(label for _, label in SUMMARY_COLUMNS) + " |",
        "|---|---|" + "---:|" * len(SUMMARY_COLUMNS),
    ]
    for scenario in SCENARIOS:
        for protocol in PROTOCOLS:
            for entry in summary:
                if entry["scenario"] == scenario and entry["protocol"] == protocol:
                    lines.append(f"| {scenario} | {protocol} | {_median_cells(entry)} |")
    return "\n".join(lines) + "\n"
