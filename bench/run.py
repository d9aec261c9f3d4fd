"""Benchmarks of the rebalance engine and the simulator; prints Markdown, `--write` records it.

Figures are measured on the machine that runs this (recorded in the output), side by side in one
run, so ratios between protocols are comparable even when absolute times are not.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from streamapp.rebalance import AppConfig, Assignment, MemberView, RebalanceConfig, member_targets, plan
from streamapp.sim.measured import SimResult
from streamapp.sim.report import table
from streamapp.sim.scenario import load_scenario
from streamapp.sim.simulator import simulate

HERE = Path(__file__).parent
SCENARIOS = HERE / "scenarios"
PUBLISHED = {"eager_mb_s": 252.68, "cooperative_mb_s": 537.81, "eager_max": 0.41, "cooperative_max": 3.82}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", metavar="PATH", help="also write the Markdown report to PATH")
    parser.add_argument("--quick", action="store_true", help="smaller engine sizes (for a smoke run)")
    args = parser.parse_args()
    sections = [header(args), headline(), scenarios(), engine_cost(args.quick), recorded()]
    report = "\n\n".join(sections) + "\n"
    print(report)
    if args.write:
        Path(args.write).write_text(report)
        print(f"written to {args.write}", file=sys.stderr)
    return 0


def header(args: argparse.Namespace) -> str:
    command = "make bench" if not args.quick else "python bench/run.py --quick"
    return "\n".join(
        [
            "# Benchmark results",
            "",
            f"Made by `{command}` on {time.strftime('%Y-%m-%d')}: Python {platform.python_version()}, "
            f"{os.cpu_count()} cores, {platform.machine()}, load average {os.getloadavg()[0]:.1f} at the "
            "start. The simulator runs the real engine; the data plane's figures (the last sections) come "
            "from `bench/dataplane.py`, `bench/localstores.py`, `bench/stores.py` and `bench/kafkabench.py` "
            "([results/](results/)), which `make bench` runs first.",
        ]
    )


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def headline() -> str:
    """The seeds' setup: 900 tasks on 3 workers, a 4th joins, one bounces."""
    scenario = load_scenario(SCENARIOS / "headline-900.yaml")
    runs: list[SimResult] = []
    for protocol in ("eager", "cooperative", "streamapp"):
        progress(f"headline-900: {protocol}")
        runs.append(simulate(scenario.with_protocol(protocol))[0])
    progress("headline-900: streamapp with one standby")
    standby = replace(scenario, rebalance=replace(scenario.rebalance, standby_replicas=1))
    with_standby = replace(simulate(standby)[0], protocol="streamapp+standby")
    runs.append(with_standby)
    eager, cooperative, streamapp = runs[0], runs[1], runs[2]
    lines = [
        "## Headline: 900 tasks on 3 workers, a 4th joins at 60 s, one bounces at 300 s (30 s)",
        "",
        "`streamapp simulate bench/scenarios/headline-900.yaml --protocol eager --protocol cooperative "
        "--protocol streamapp` (plus the same with `standbyReplicas: 1`).",
        "",
        "```",
        table(runs),
        "```",
        "",
        "| ratio | eager → cooperative | eager → streamapp | eager → streamapp+standby | published (Connect, eager → incremental) |",
        "|---|---|---|---|---|",
        f"| task downtime (less is better) | {_ratio(eager.task_downtime_seconds, cooperative.task_downtime_seconds)} "
        f"| {_ratio(eager.task_downtime_seconds, streamapp.task_downtime_seconds)} "
        f"| {_ratio(eager.task_downtime_seconds, with_standby.task_downtime_seconds)} | — |",
        f"| blocking restore records | {_ratio(eager.blocking_restore_records, cooperative.blocking_restore_records)} "
        f"| {_ratio(eager.blocking_restore_records, streamapp.blocking_restore_records)} "
        f"| {_ratio(eager.blocking_restore_records, with_standby.blocking_restore_records)} | — |",
        f"| worst 60 s window throughput | {_gain(eager.min_window_throughput_ratio, cooperative.min_window_throughput_ratio)} "
        f"| {_gain(eager.min_window_throughput_ratio, streamapp.min_window_throughput_ratio)} "
        f"| {_gain(eager.min_window_throughput_ratio, with_standby.min_window_throughput_ratio)} "
        f"| {PUBLISHED['eager_max']} → {PUBLISHED['cooperative_max']} MB/s "
        f"({PUBLISHED['cooperative_max'] / PUBLISHED['eager_max']:.1f}×) |",
        f"| aggregate throughput | {_gain(eager.throughput_ratio, cooperative.throughput_ratio)} "
        f"| {_gain(eager.throughput_ratio, streamapp.throughput_ratio)} "
        f"| {_gain(eager.throughput_ratio, with_standby.throughput_ratio)} "
        f"| {PUBLISHED['eager_mb_s']} → {PUBLISHED['cooperative_mb_s']} MB/s "
        f"({PUBLISHED['cooperative_mb_s'] / PUBLISHED['eager_mb_s']:.2f}×) |",
        "",
        "Reading it: the published figures measure Connect workers that can fall behind for good, while "
        "these simulated executors process 4× faster than input arrives, so every protocol eventually "
        "catches up (aggregate ratio 1.0); the cost of a rebalance shows as downtime, blocking restores "
        "and the worst window. Holding a bounced member's tasks for its return (cooperative and "
        "streamapp) costs the 30 s restart in the worst window unless a standby can take over at once.",
    ]
    return "\n".join(lines)


def scenarios() -> str:
    """Every shipped scenario under the three protocols, key figures only."""
    rows = [
        "## Shipped scenarios (`bench/scenarios/`)",
        "",
        "`local state` is where members keep their tasks' stores (`workload.localState`): `claim` "
        "(`executor.storage.size` set: a returning member replays only the delta) or `emptyDir` (the "
        "default: a replaced pod restores in full).",
        "",
        "`balanced after` is the time from the last event until the assignment is at rest and balanced "
        "again (`time_to_balance_seconds`).",
        "",
        "| scenario | local state | protocol | downtime (task-s) | worst task (s) | blocking restore "
        "| background restore | movements | generations | worst 60 s | double owner | balanced after (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(SCENARIOS.glob("*.yaml")):
        if path.stem == "headline-900":
            continue
        scenario = load_scenario(path)
        for protocol in ("eager", "cooperative", "streamapp"):
            progress(f"{path.stem}: {protocol}")
            r = simulate(scenario.with_protocol(protocol))[0]
            rows.append(
                f"| {path.stem} | {scenario.workload.local_state} | {protocol} | {r.task_downtime_seconds:g} "
                f"| {r.max_task_downtime_seconds:g} | {r.blocking_restore_records:,} "
                f"| {r.background_restore_records:,} "
                f"| {r.task_movements} | {r.generations} | {r.min_window_throughput_ratio:.3f} "
                f"| {r.double_ownership_violations} "
                f"| {'never' if r.time_to_balance_seconds is None else f'{r.time_to_balance_seconds:g}'} |"
            )
    return "\n".join(rows)


def engine_cost(quick: bool) -> str:
    """Milliseconds to plan one generation, by tasks × members, for the default protocol."""
    tasks_list = (1_000, 10_000) if not quick else (1_000,)
    members_list = (10, 100, 1_000) if not quick else (10, 100)
    rows = [
        "## Engine cost: one `plan()` call (median of 5, milliseconds)",
        "",
        "`fresh` assigns every task from nothing; `steady` re-plans a balanced, caught-up app (the "
        "cost of every reconcile); `join` plans one new member (warmups chosen, nothing revoked yet); "
        "`+standby` is the same with `standbyReplicas: 1`.",
        "",
        "| tasks | members | fresh | steady | join | fresh +standby | steady +standby | join +standby |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for tasks in tasks_list:
        for members in members_list:
            progress(f"engine cost: {tasks} tasks × {members} members")
            cells = [*_costs(tasks, members, 0), *_costs(tasks, members, 1)]
            rows.append(f"| {tasks:,} | {members:,} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    rows += [
        "",
        "### A single member change at fixed delta as tasks grow (10 members → 11)",
        "",
        "| tasks | join (ms) | tasks moved by the plan |",
        "|---|---|---|",
    ]
    for tasks in (1_000, 2_000, 5_000, 10_000, 20_000) if not quick else (1_000, 2_000):
        app, steady, views = _steady(tasks, 10, 0)
        joined = AppConfig(tasks, 11, app.rebalance)
        fresh_member = [*views, MemberView(10)]
        result = plan(joined, fresh_member, steady, 1.0)
        ms = _time(lambda: plan(joined, fresh_member, steady, 1.0))  # noqa: B023 - called before the loop moves on
        moved = sum(1 for t in result.assignment.tasks if t.warmups)
        rows.append(
            f"| {tasks:,} | {ms:.1f} | {moved} warmups (budget {app.rebalance.max_warmup_replicas}) |"
        )
    rows += [
        "",
        "Planning is linear in tasks (the whole assignment is re-derived each time, which is what makes "
        "it level-triggered); what a membership change *moves* is bounded by balance and the warmup "
        "budget, not by the number of tasks.",
    ]
    return "\n".join(rows)


# Results the other benchmarks record (those of `make bench` are run first), included one heading level
# down, with the command that records each.
RECORDED = {
    "cluster-headline": "make bench-cluster",
    "scale": "make bench-scale",
    "apiscale": "make bench-apiscale",
    "dataplane": "make bench",
    "localstores": "make bench",
    "bigstate": "make bench",
    "stores": "make bench",
    "kafka": "make bench",
}


def recorded() -> str:
    """The recorded figures of the cluster and data-plane benchmarks (bench/results/<name>.md), in order."""
    sections = []
    for name, command in RECORDED.items():
        path = HERE / "results" / f"{name}.md"
        if not path.exists():
            sections.append(f"## {name}\n\nNot recorded yet: run `{command}`.")
            continue
        sections.append(
            "\n".join(
                ("#" + line) if line.startswith("#") else line for line in path.read_text().splitlines()
            )
        )
    return "\n\n".join(sections)


def _costs(tasks: int, members: int, standbys: int) -> tuple[float, float, float]:
    app, steady, views = _steady(tasks, members, standbys)
    fresh = _time(lambda: plan(app, [MemberView(i) for i in range(members)], Assignment(), 0.0))
    again = _time(lambda: plan(app, views, steady, 1.0))
    joined = AppConfig(tasks, members + 1, app.rebalance)
    with_new = [*views, MemberView(members)]
    join = _time(lambda: plan(joined, with_new, steady, 1.0))
    return fresh, again, join


def _steady(tasks: int, members: int, standbys: int) -> tuple[AppConfig, Assignment, list[MemberView]]:
    """A balanced, caught-up, acknowledged assignment and the members' views of it."""
    app = AppConfig(tasks, members, RebalanceConfig(standby_replicas=standbys))
    assignment = plan(app, [MemberView(i) for i in range(members)], Assignment(), 0.0).assignment
    targets = member_targets(assignment)
    views = [
        MemberView(
            i,
            lags=dict.fromkeys((*targets[i].active, *targets[i].standby), 0) if i in targets else {},
            acked_generation=assignment.generation,
        )
        for i in range(members)
    ]
    settled = plan(app, views, assignment, 0.5).assignment
    return app, settled, views


def _time(call: Callable[[], object], repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _ratio(before: float, after: float) -> str:
    if after == 0:
        return f"{before:,.0f} → 0"
    return f"{before / after:.2f}× less"


def _gain(before: float, after: float) -> str:
    return f"{before:.3f} → {after:.3f} ({after / before:.2f}×)" if before else "—"


if __name__ == "__main__":
    sys.exit(main())
