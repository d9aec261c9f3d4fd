"""One app of 100,000 tasks on 1,000 members against the real API server: what the operator costs.

`bench/scale.py` measures what the operator renders and computes against a stand-in for the API
server. This runs the real thing at the largest supported size: the local control plane
(e2e/localcluster) with the member pods on its kwok nodes (Running and Ready, running nothing), the
operator as a `streamapp operator` process, and the executors played from this process
(e2e/playedmembers.py) on the executors' schedule: every target acknowledged at once, a member with a
copy catching up reporting every 2 s, every other Ready member every `--report-interval` seconds (the
executors' progress interval, 10 s; 2 s is the worst case, every report interval) with each active
task's input lag changed, warmups catching up at `--restore-rate` records/s.

Measured from outside the operator: its CPU time and peak memory (/proc), the reports written per
second, the writes the app received (a watch on it), and the sizes of the app and of the largest
StreamAppMember as the API server returns them. Phases: placement (the app created, until every task
is active and every member has acknowledged), steady (reports only), scale-out by 10% (until balanced
and acknowledged again, or `--scale-seconds`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from kubesetup import create_namespace, install_crds, kwok_app
from localcluster.controlplane import LocalCluster
from localcluster.processes import free_port
from localcluster.versions import KUBERNETES
from localcluster.waiting import wait_for
from playedmembers import PlayedMembers, api_client, object_sizes, unsettled
from streamapp.api.names import APPS, GROUP, VERSION

APP = "big"
NAMESPACE = "apiscale"
STREAMAPP = Path(sys.executable).with_name("streamapp")
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    """CPU seconds and peak resident memory of one process (with its reaped children)."""

    cpu_s: float
    peak_mb: float


def usage(pid: int) -> Usage:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    peak = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmHWM:")
    )
    return Usage(ticks / TICK, peak / 1024)


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores; /proc/stat, idle and
    iowait left out)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / TICK


# The processes besides the operator whose CPU the report sets beside its own: the control plane's
# busiest components and this process, whose threads play the executors' reports.
NEIGHBOURS = ("kube-apiserver", "etcd", "kwok")
PLAYER = "this process (the played executors)"


def neighbour_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of each neighbour, and of the machine as a whole ("machine")."""
    cpu = {name: usage(pids[name]).cpu_s for name in NEIGHBOURS if name in pids}
    return {**cpu, PLAYER: usage(os.getpid()).cpu_s, "machine": machine_busy()}


@dataclass
class Reconciles:
    """The operator's own histograms (its /metrics): reconciles run, their wall seconds, plans run
    and their seconds, summed since it started."""

    count: float = 0.0
    seconds: float = 0.0
    plans: float = 0.0
    plan_seconds: float = 0.0

    def __sub__(self, other: Reconciles) -> Reconciles:
        return Reconciles(
            self.count - other.count,
            self.seconds - other.seconds,
            self.plans - other.plans,
            self.plan_seconds - other.plan_seconds,
        )


def reconciles(port: int) -> Reconciles:
    """Scraped from the operator's metrics endpoint (the engine's plans include reused ones)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in (
            "streamapp_reconcile_seconds_count",
            "streamapp_reconcile_seconds_sum",
            "streamapp_plan_seconds_count",
            "streamapp_plan_seconds_sum",
        ):
            values[name] = float(value)
    return Reconciles(
        values.get("streamapp_reconcile_seconds_count", 0.0),
        values.get("streamapp_reconcile_seconds_sum", 0.0),
        values.get("streamapp_plan_seconds_count", 0.0),
        values.get("streamapp_plan_seconds_sum", 0.0),
    )


@dataclass
class Phase:
    name: str
    wall_s: float
    cpu_s: float
    peak_mb: float
    reports: int
    failed: int
    app_writes: int
    outcome: str
    reconciled: Reconciles = field(default_factory=Reconciles)
    samples: list[str] = field(default_factory=list)
    neighbours: dict[str, float] = field(default_factory=dict)


def run_phase(
    name: str,
    operator: Operator,
    played: PlayedMembers,
    seconds: float,
    done: Callable[[], str | None] | None,
    pids: dict[str, int],
) -> Phase:
    """Until `done` says None (or `seconds` pass): the operator's CPU over the phase, and its
    neighbours' (`pids`: the control plane's components), progress every 15 s."""
    start, before, reconciled = time.monotonic(), usage(operator.process.pid), reconciles(operator.metrics)
    neighbours = neighbour_cpu(pids)
    counted = (played.counters.reports, played.counters.failed, played.counters.app_writes)
    outcome, samples, last = "reports only" if done is None else "", [], start
    while time.monotonic() - start < seconds:
        if operator.process.poll() is not None:
            raise RuntimeError(
                f"the operator exited ({operator.process.returncode}) during {name}; see its log"
            )
        time.sleep(5.0)
        waiting = _asked(done) if done is not None else None
        now = time.monotonic()
        if done is not None and waiting is None:
            outcome = f"done in {now - start:.0f} s"
            break
        if waiting is not None:
            outcome = f"still going after {seconds:.0f} s, waiting for {waiting}"
        if now - last >= 15:
            cpu = usage(operator.process.pid).cpu_s - before.cpu_s
            line = (
                f"[{name}] {now - start:.0f}s: operator {cpu / (now - start):.2f} core, "
                f"{played.counters.reports - counted[0]} reports"
                + (f", waiting for: {waiting}" if waiting else "")
            )
            print(line, flush=True)
            samples.append(line)
            last = now
    wall, after = time.monotonic() - start, usage(operator.process.pid)
    return Phase(
        name,
        wall,
        after.cpu_s - before.cpu_s,
        after.peak_mb,
        played.counters.reports - counted[0],
        played.counters.failed - counted[1],
        played.counters.app_writes - counted[2],
        outcome,
        reconciles(operator.metrics) - reconciled,
        samples,
        {name: cpu - neighbours[name] for name, cpu in neighbour_cpu(pids).items()},
    )


def _asked(done: Callable[[], str | None]) -> str | None:
    """What the phase still waits for; a failed look (listing 1,000 members of ~35 kB from a busy
    API server can break off mid-reply) counts as still waiting, and the next look asks again."""
    try:
        return done()
    except Exception as error:  # any failure of one look: it says nothing about the app
        return f"(the last look failed: {type(error).__name__})"


def namespaces(core: client.CoreV1Api) -> set[str]:
    return {n.metadata.name for n in core.list_namespace().items}


@dataclass
class Operator:
    """The operator's process and the port of its metrics."""

    process: subprocess.Popen[bytes]
    metrics: int


@contextmanager
def operator_process(kubeconfig: Path, log: Path) -> Iterator[Operator]:
    port = free_port()
    argv = [str(STREAMAPP), "operator", "--namespace", NAMESPACE, "--kubeconfig", str(kubeconfig)]
    argv += ["--metrics-port", str(port), "--metrics-address", "127.0.0.1", "--no-leader-election"]
    process = subprocess.Popen(argv, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _serving(port), 60, "the operator's metrics")
        yield Operator(process, port)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def _serving(port: int) -> bool:
    try:
        reconciles(port)
    except OSError:
        return False
    return True


def report(
    args: argparse.Namespace, phases: list[Phase], size: tuple[int, int], load: tuple[float, float]
) -> str:
    replicas = args.members
    lines = [
        "# One app of 100,000 tasks on the real API server",
        "",
        f"Made by `make bench-apiscale` (`bench/apiscale.py`) on {dt.date.today()}: Kubernetes {KUBERNETES} "
        f"(the local control plane), Python {platform.python_version()}, {os.cpu_count()} cores; load average "
        f"{load[0]:.1f} at start, {load[1]:.1f} at end. One machine runs etcd, the API server, the scheduler, "
        "the controller manager, kwok, the operator and this process playing the executors, so what the "
        "operator gets is what is left of 2 cores.",
        "",
        f"The app: {args.tasks:,} tasks placed on {args.members - args.members // 10:,} members (pods on kwok "
        f"nodes) and left to report, then scaled out to {replicas:,} (the most an app may have); standbyReplicas "
        f"{args.standbys}, maxWarmupReplicas {args.max_warmups}. Each settled member's report is written every {args.report_interval:g} s "
        f"(jittered ±10%; {replicas:,} members send {replicas / args.report_interval:,.0f} reports/s) with every active task's "
        "input lag changed, a member with a copy catching up every 2 s, every new target acknowledged at "
        f"once; warmups catch up at {args.restore_rate:,.0f} records/s from 20,000. The operator: "
        "`streamapp operator` with its defaults (`--min-reconcile-interval` 1 s), out of the cluster; its "
        "CPU is user+system time from /proc.",
        "",
        "| phase | wall s | operator CPU s | share of a core | peak RSS MB | reports written (per s) | failed "
        "| app writes (per s) | reconciles (mean wall s) | plans computed or reused (mean s) | outcome |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in phases:
        lines.append(
            f"| {p.name} | {p.wall_s:.0f} | {p.cpu_s:.1f} | {p.cpu_s / p.wall_s:.2f} | {p.peak_mb:.0f} "
            f"| {p.reports:,} ({p.reports / p.wall_s:.0f}) | {p.failed} | {p.app_writes:,} "
            f"({p.app_writes / p.wall_s:.2f}) | {p.reconciled.count:,.0f} ({_mean(p.reconciled.seconds, p.reconciled.count)}) "
            f"| {p.reconciled.plans:,.0f} ({_mean(p.reconciled.plan_seconds, p.reconciled.plans)}) | {p.outcome} |"
        )
    lines += [
        "",
        *cost_per_report(phases, replicas / args.report_interval),
        "",
        *where_the_cores_went(phases),
    ]
    lines += [
        "",
        f"Objects as the API server sends them once settled: the StreamApp {size[0]:,} bytes, the largest "
        f"StreamAppMember {size[1]:,} bytes (etcd's request limit is 1,572,864).",
        "",
        "Progress lines as printed:",
        "",
        "```",
        *[s for p in phases for s in p.samples],
        "```",
    ]
    return "\n".join(lines) + "\n"


def where_the_cores_went(phases: list[Phase]) -> list[str]:
    """Per phase, the share of a core of the operator, its neighbours and the rest of the machine:
    what limited the reports this machine's API server let through."""
    names = [n for n in (*NEIGHBOURS, PLAYER) if any(n in p.neighbours for p in phases)]
    cores = os.cpu_count() or 1
    lines = [
        f"Where the {cores} cores went (share of a core over each phase, CPU time from /proc; *rest*: the "
        "machine's busy time less the processes named; *idle*: what no process used):",
        "",
        f"| phase | operator | {' | '.join(names)} | rest | idle |",
        f"|---|---:|{'---:|' * len(names)}---:|---:|",
    ]
    for p in phases:
        if "machine" not in p.neighbours:
            continue
        shares = [p.neighbours.get(n, 0.0) / p.wall_s for n in names]
        busy = p.neighbours["machine"] / p.wall_s
        rest = busy - p.cpu_s / p.wall_s - sum(shares)
        cells = " | ".join(f"{share:.2f}" for share in shares)
        lines.append(
            f"| {p.name} | {p.cpu_s / p.wall_s:.2f} | {cells} | {max(rest, 0.0):.2f} | {max(cores - busy, 0.0):.2f} |"
        )
    return lines


def cost_per_report(phases: list[Phase], asked: float) -> list[str]:
    """Split the steady phases' CPU between reconciles and reports: each phase's CPU per second is
    (reconciles per second × CPU of one) + (reports per second × CPU of one), two phases give two
    equations. Reconciles are coalesced — at most one a second whatever the reports, by
    `--min-reconcile-interval` — so their rate is not the report rate, and a line over the report rate
    alone (the first version of this) mixed them up. From the two costs: the share of a core at the
    rate asked (which this machine's API server may not let through), with one reconcile a second."""
    steady = [p for p in phases if p.name.startswith("steady") and p.reports]
    if len(steady) < 2:
        return []
    before = phases[: phases.index(steady[0])]
    unfinished = [p.name for p in before if p.outcome.startswith("still going")]
    caveat = (
        [
            f"The {unfinished[-1]} phase had not finished when the steady ones began: they measure reports "
            "while its rebalance went on.",
            "",
        ]
        if unfinished
        else []
    )
    rows = [(p.reconciled.count / p.wall_s, p.reports / p.wall_s, p.cpu_s / p.wall_s) for p in steady[:2]]
    (a1, b1, c1), (a2, b2, c2) = rows
    seen = (
        f"Steady, the operator used {c1:.2f} of a core with {a1:.2f} reconciles and {b1:.1f} reports a "
        f"second, and {c2:.2f} with {a2:.2f} and {b2:.1f}."
    )
    det = a1 * b2 - a2 * b1
    if abs(det) < 0.15 * max(abs(a1 * b2), abs(a2 * b1)):
        return [*caveat, f"{seen} The two mixes are too alike to tell a report's cost from a reconcile's."]
    per_reconcile = (c1 * b2 - c2 * b1) / det
    per_report = (a1 * c2 - a2 * c1) / det
    if per_reconcile < 0 or per_report < 0:
        return [
            *caveat,
            f"{seen} Solved for the cost of one of each, that gives {per_reconcile * 1000:.0f} ms a "
            f"reconcile and {per_report * 1000:.1f} ms a report: one is negative, so the split is noise "
            "and no rate is extrapolated.",
        ]
    return [
        *caveat,
        f"{seen} Solved for the cost of one of each: {per_reconcile * 1000:.0f} ms of CPU a reconcile and "
        f"{per_report * 1000:.1f} ms a report (watch event, index, the report parsed). At one reconcile a "
        f"second and the {asked:,.0f} reports/s the full app's members send that is "
        f"{per_reconcile + per_report * asked:.2f} of a core.",
    ]


def _mean(total: float, count: float) -> str:
    return f"{total / count:.3f}" if count else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="write the Markdown report here (default: print it)")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--standbys", type=int, default=0)
    parser.add_argument(
        "--max-warmups",
        type=int,
        default=10,
        help="rebalance.maxWarmupReplicas (warmups at once per receiving member; the default 2 fills a "
        "member that joins late or a scale-out's new members 2 tasks a round)",
    )
    parser.add_argument(
        "--report-interval",
        type=float,
        default=10.0,
        help="seconds between a settled member's reports (the executors' progress interval; 2 is every "
        "report interval, the worst case)",
    )
    parser.add_argument("--restore-rate", type=float, default=10_000.0)
    parser.add_argument("--workers", type=int, default=8, help="played threads")
    parser.add_argument("--place-seconds", type=float, default=1_200.0)
    parser.add_argument("--steady-seconds", type=float, default=120.0)
    parser.add_argument("--scale-seconds", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    cluster = LocalCluster()
    started_here = not cluster.is_running()
    cluster.up()
    api = api_client(cluster.kubeconfig)
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    # placed on 90% of the members and left to report (the steady state, settled), then scaled out to
    # all of them (the most an app may have): a scale-out of a tenth of the tasks
    first = args.members - args.members // 10
    pids = cluster.pids()
    try:
        install_crds(api)
        create_namespace(api, NAMESPACE, {"streamapp.dev/bench": "apiscale"})
        with (
            operator_process(cluster.kubeconfig, args.out / "apiscale-operator.log") as operator,
            PlayedMembers(
                cluster.kubeconfig, NAMESPACE, APP, args.report_interval, args.restore_rate, args.workers
            ) as played,
        ):
            custom.create_namespaced_custom_object(
                GROUP,
                VERSION,
                NAMESPACE,
                APPS,
                kwok_app(
                    APP,
                    first,
                    args.tasks,
                    "streamapp/executor:bench",
                    standbyReplicas=args.standbys,
                    maxWarmupReplicas=args.max_warmups,
                ),
            )
            phases = [
                run_phase(
                    f"placement on {first:,}",
                    operator,
                    played,
                    args.place_seconds,
                    lambda: unsettled(custom, NAMESPACE, APP),
                    pids,
                )
            ]
            size = object_sizes(custom, NAMESPACE, APP)
            phases.append(run_phase("steady", operator, played, args.steady_seconds, None, pids))
            # the same at half the rate written: two points give the cost of a report apart from the
            # cost of reconciling at all, whatever rate this machine's API server let through
            full = phases[-1]
            played.pace(first / max(full.reports / full.wall_s / 2, 1e-3))
            phases.append(
                run_phase("steady, half the rate", operator, played, args.steady_seconds, None, pids)
            )
            played.pace(args.report_interval)
            custom.patch_namespaced_custom_object_scale(
                GROUP, VERSION, NAMESPACE, APPS, APP, {"spec": {"replicas": args.members}}
            )
            phases.append(
                run_phase(
                    f"scale-out to {args.members:,}",
                    operator,
                    played,
                    args.scale_seconds,
                    lambda: unsettled(custom, NAMESPACE, APP),
                    pids,
                )
            )
    finally:
        core.delete_namespace(NAMESPACE)
        if started_here:
            cluster.down()
        else:  # a cluster left running: the next run creates the namespace again
            wait_for(lambda: NAMESPACE not in namespaces(core), 600, f"namespace {NAMESPACE} deleted")
    text = report(args, phases, size, (load, os.getloadavg()[0]))
    if args.write:
        args.write.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
