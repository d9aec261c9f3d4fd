"""The chaos run's figures as Markdown (bench/results/chaos.md), with the machine it ran on."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from importlib import metadata

from chaos.faults import Kind
from chaos.scenario import Outcome
from localcluster.versions import ETCD, KUBERNETES

NO_APISERVER_RESTARTS = "\nNo kube-apiserver restart in this run (STREAMAPP_CHAOS_APISERVER_RESTARTS=0)."


@dataclass(frozen=True)
class Machine:
    cpus: int
    memory_gib: float
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]


def memory_gib() -> float:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024**2
    return 0.0


def render(outcome: Outcome, machine: Machine, variant: str) -> str:
    config, tally = outcome.config, outcome.tally
    rows = [f"| {kind.value} | {outcome.injected[kind]} |" for kind in Kind]
    load = ", ".join
    return "\n".join(
        [
            "# Chaos run (real control plane, real PySpark executors)",
            "",
            f"Variant: **{variant}** — `make chaos` (e2e/chaos, tests/integration/test_chaos.py). "
            f"{config.duration_s:.0f} s of chaos, seed {config.seed}, {config.partitions} partitions, "
            f"members {' → '.join(map(str, config.replicas))}, input {config.rate:.0f} records/s, "
            "two operator replicas with leader election.",
            "",
            "## Faults injected and survived",
            "",
            "| fault | count |",
            "|---|---|",
            *rows,
            *([NO_APISERVER_RESTARTS] if not outcome.injected[Kind.APISERVER_RESTART] else []),
            "",
            "## Checks",
            "",
            f"- observer polls: {tally.polls} ({tally.missed_polls} missed while the API server was away)",
            f"- commit manifests checked: {tally.manifests_accepted} accepted, "
            f"{tally.manifests_refused} refused (zombie commits fenced)",
            f"- most members reporting one task active at one instant: {tally.max_active_owners}",
            f"- **violations: {len(tally.violations)}** (two actives, epochs backwards, one epoch two owners)",
            *[f"  - {v}" for v in tally.violations],
            *[f"  - evidence: {e}" for e in tally.evidence],
            f"- exactly once: {outcome.records} records in {outcome.batches} committed batches checked "
            "against a reference computed from the input: 0 lost, 0 duplicated",
            f"- convergence: Ready, nothing revoking or warming, every task active on one member, "
            f"{outcome.recovery_s:.0f} s after the chaos ended (input drained meanwhile)",
            "",
            "## Fault log",
            "",
            "```",
            *outcome.log,
            "```",
            "",
            "## Machine and versions",
            "",
            f"- {machine.cpus} CPUs, {machine.memory_gib:.1f} GiB memory (shared with other work)",
            f"- load average before: {load(f'{x:.2f}' for x in machine.load_before)}; "
            f"after: {load(f'{x:.2f}' for x in machine.load_after)}",
            f"- Python {platform.python_version()}, PySpark {metadata.version('pyspark')}, "
            f"kubernetes client {metadata.version('kubernetes')}, kopf {metadata.version('kopf')}",
            f"- Kubernetes {KUBERNETES}, etcd {ETCD} (local control plane), {platform.system()} "
            f"{platform.release()}",
            f"- command: `STREAMAPP_CHAOS=long STREAMAPP_CHAOS_SECONDS={config.duration_s:.0f} "
            "pytest tests/integration/test_chaos.py` (what `make chaos` runs, 600 s by default)",
            "",
        ]
    )


def machine(load_before: tuple[float, float, float]) -> Machine:
    return Machine(os.cpu_count() or 0, memory_gib(), load_before, os.getloadavg())
