"""A planned handoff between two real executors, without Kubernetes: where a moved task's stand-still goes.

Two executor processes (each its own Python and Spark session, as two member pods are) share a file
log, a state store and an output directory; this process plays the operator with the protocol's own
steps — warm the task on the destination until it has applied everything the owner committed, revoke
it on the owner (`apply` returns once its last batch committed: the acknowledgement), then make it
active on the destination at the next epoch — while input is appended to every partition once a
second. Nothing of the API server is in it (the operator's part, measured on a cluster, is in
bench/results/rollout.md), so what it measures is the executors' own share of a handoff and how it
compares with a batch.

Measured from the commit manifests (`committedAt`, written by the committing executor): per moved
task the longest gap between consecutive commits around its handoff against the app's usual gap, split
into the owner's last commit → acknowledgement → assignment → the new owner's first commit. Runs
alternate directions (A→B, then B→A) so both executors take over.

`--fresh` measures what a scale-out does: every other handoff goes to a member started just for it (a
new process and Spark session, ready once its warm-up ran, as a new pod reports ready), and the next
one hands the task from that member back to a warm one, which then stops; so each fresh destination
has a warm one measured beside it on the same machine.

    PYTHONPATH=e2e .venv/bin/python bench/handoff.py --write bench/results/handoff.md
    PYTHONPATH=e2e .venv/bin/python bench/handoff.py --fresh --write bench/results/handoff-fresh.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from realapps import feeding
from streamapp.executor.io.generate import GenerateSpec
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Kind
from streamapp.executor.state.manifest import read as read_manifest

COUNTS = "streamapp.executor.samples.counts:counts"


def member(name: str, root: str, conn: Connection, shared_batches: bool) -> None:
    """One executor process: warm up, run the lanes, and obey the parent's `apply`/`status`/`stop`."""
    import logging
    import threading

    from streamapp.executor import pipeline as pipelines
    from streamapp.executor.io.sink import FileSink
    from streamapp.executor.runtime import Executor, Target
    from streamapp.executor.spark import SparkSettings, session
    from streamapp.executor.task import TaskConfig

    logging.basicConfig(
        filename=Path(root) / f"{name}.log",
        level=logging.INFO,
        format="%(asctime)s.%(msecs)03d %(threadName)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    settings = SparkSettings(conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
    pipeline = pipelines.load(COUNTS)
    executor = Executor(
        StateLayout(Path(root) / "state"),
        FileLog(Path(root) / "input"),
        FileSink(Path(root) / "outputs"),
        pipeline,
        TaskConfig(owner=name, shared_batches=shared_batches),
        spark=lambda: session(settings),
    )
    pipelines.warm_up(pipeline, session(settings))
    stop = threading.Event()
    worker = threading.Thread(target=executor.run, args=(stop.is_set, 0.2), name="batches", daemon=True)
    worker.start()
    conn.send("ready")
    while True:
        command, argument = conn.recv()
        if command == "apply":
            active, warmup = argument
            executor.apply(Target(active=active, warmup=frozenset(warmup)))
            conn.send(time.time())
        elif command == "lag":
            conn.send({s.partition: s.lag for s in executor.status()})
        else:
            stop.set()
            worker.join()
            executor.apply(Target())
            conn.send("stopped")
            return


@dataclass
class Member:
    """The parent's handle on one executor process and the target it last gave it."""

    name: str
    conn: Connection
    process: Any
    active: dict[int, int]
    warmup: set[int]

    def apply(self) -> float:
        """Send the current target; returns the wall time at which `apply` returned in the member."""
        self.conn.send(("apply", (dict(self.active), sorted(self.warmup))))
        returned: float = self.conn.recv()
        return returned

    def lag(self, partition: int) -> int | None:
        self.conn.send(("lag", None))
        lags: dict[int, int] = self.conn.recv()
        return lags.get(partition)


@dataclass
class Handoff:
    """One moved task and the wall times of its steps."""

    task: int
    source: str
    destination: str
    warmed: float
    acknowledged: float
    assigned: float
    fresh: bool = False  # the destination started for this handoff


def start(name: str, root: Path, active: dict[int, int], shared_batches: bool) -> Member:
    context = mp.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=member, args=(name, str(root), child, shared_batches), name=name)
    process.start()
    if parent.recv() != "ready":
        raise RuntimeError(f"member {name} did not start")
    handle = Member(name, parent, process, dict(active), set())
    handle.apply()
    return handle


def hand_off(
    task: int, source: Member, destination: Member, operator_delay: float, fresh: bool = False
) -> Handoff:
    """The protocol's steps, as the operator drives them."""
    destination.warmup.add(task)
    destination.apply()
    deadline = time.monotonic() + 120
    while destination.lag(task) != 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"task {task} did not catch up on {destination.name}")
        time.sleep(0.1)
    warmed = time.time()
    epoch = source.active.pop(task)
    acknowledged = source.apply()
    time.sleep(operator_delay)
    destination.warmup.discard(task)
    destination.active[task] = epoch + 1
    assigned = destination.apply()
    return Handoff(task, source.name, destination.name, warmed, acknowledged, assigned, fresh)


def commits(state: StateLayout, partition: int) -> list[tuple[float, str]]:
    """(commit time, owner) of every batch manifest of `partition`, in order."""
    found, seq = [], 0
    while (manifest := read_manifest(state, partition, seq)) is not None:
        if manifest.kind is Kind.BATCH and manifest.committed_at is not None:
            found.append((manifest.committed_at, manifest.owner))
        seq += 1
    return found


@dataclass
class Measured:
    """One handoff as the manifests show it."""

    handoff: Handoff
    last_commit: float
    first_commit: float
    usual_gap: float

    @property
    def gap(self) -> float:
        return self.first_commit - self.last_commit


def measure(state: StateLayout, handoffs: list[Handoff], partitions: int) -> list[Measured]:
    """Per handoff, the owner's last commit before its acknowledgement and the new owner's first commit
    after the assignment; the usual gap is the median of every gap that spans no handoff."""
    spans: list[tuple[int, float, float]] = []
    found = []
    for h in handoffs:
        times = commits(state, h.task)
        last = max(t for t, owner in times if owner == h.source and t <= h.acknowledged)
        first = min(t for t, owner in times if owner == h.destination and t >= h.assigned)
        spans.append((h.task, last, first))
        found.append((h, last, first))
    gaps = [
        after - before
        for partition in range(partitions)
        for (before, _), (after, _) in itertools.pairwise(commits(state, partition))
        if not any(p == partition and before < first and after > last for p, last, first in spans)
    ]
    usual = statistics.median(gaps)
    return [Measured(h, last, first, usual) for h, last, first in found]


def report(rows: list[Measured], args: argparse.Namespace, load: tuple[float, float]) -> str:
    usual = rows[0].usual_gap if rows else 0.0
    lines = [
        "# A planned handoff between two real executors (no Kubernetes)",
        "",
        f"`bench/handoff.py` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load average {load[0]:.1f} at start and {load[1]:.1f} at end. Two executor "
        f"processes, {args.partitions} tasks ({args.partitions // 2} each), {args.rate} records/s appended to "
        "every partition once a second, the count pipeline; this process plays the operator: warm, revoke "
        f"(the acknowledgement is `apply` returning), then assign {args.operator_delay:g} s later. Times from "
        "the commit manifests' `committedAt` and the members' clocks (one machine).",
        "",
        f"Usual gap between a task's commits (median of all gaps outside the handoffs): **{usual:.2f} s**.",
        "",
        "| task | from → to | destination | longest gap s | beyond the usual s | last commit → ack s "
        "| ack → assign s | assign → first commit s |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for m in rows:
        h = m.handoff
        lines.append(
            f"| {h.task} | {h.source} → {h.destination} | {'fresh' if h.fresh else 'warm'} | {m.gap:.2f} "
            f"| {m.gap - m.usual_gap:.2f} | {h.acknowledged - m.last_commit:.2f} "
            f"| {h.assigned - h.acknowledged:.2f} | {m.first_commit - h.assigned:.2f} |"
        )
    lines.append("")
    for kind in ("warm", "fresh"):
        mine = [m for m in rows if m.handoff.fresh == (kind == "fresh")]
        if mine:
            gaps = sorted(m.gap for m in mine)
            firsts = sorted(m.first_commit - m.handoff.assigned for m in mine)
            lines.append(
                f"- {kind} destinations, {len(mine)} handoffs: longest gap median {statistics.median(gaps):.2f} s "
                f"({gaps[0]:.2f}–{gaps[-1]:.2f}); assignment to first commit median "
                f"{statistics.median(firsts):.2f} s ({firsts[0]:.2f}–{firsts[-1]:.2f}); usual gap {usual:.2f} s."
            )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, root: Path) -> list[Measured]:
    half = args.partitions // 2
    a = start("a", root, {p: 1 for p in range(half)}, not args.no_shared_batches)
    b = start("b", root, {p: 1 for p in range(half, args.partitions)}, not args.no_shared_batches)
    handoffs: list[Handoff] = []
    spec = GenerateSpec(partitions=args.partitions, keys=500, rate=args.rate * args.partitions, count=None)
    try:
        with feeding(FileLog(root / "input"), spec):
            time.sleep(args.settle)
            for index in range(args.handoffs):
                source, destination = (a, b) if index % 2 == 0 else (b, a)
                moved = {h.task for h in handoffs}
                task = (sorted(p for p in source.active if p not in moved) or sorted(source.active))[0]
                if args.fresh:
                    handoffs += via_fresh(task, source, destination, root, args)
                else:
                    handoffs.append(hand_off(task, source, destination, args.operator_delay))
                    print(f"handed task {task} {source.name} -> {destination.name}", flush=True)
                    time.sleep(args.between)
    finally:
        for handle in (a, b):
            stop(handle)
    return measure(StateLayout(root / "state"), handoffs, args.partitions)


def via_fresh(task: int, source: Member, back: Member, root: Path, args: argparse.Namespace) -> list[Handoff]:
    """`task` from `source` to a member started for it, then from there to the warm member `back`; the
    started member stops afterwards."""
    name = f"new-{task}-{time.monotonic_ns() % 10**6}"
    began = time.monotonic()
    fresh = start(name, root, {}, not args.no_shared_batches)
    print(f"{name} ready in {time.monotonic() - began:.1f} s", flush=True)
    time.sleep(args.between)  # its start-up's load on the cores passes, as the other members' ready waits
    there = hand_off(task, source, fresh, args.operator_delay, fresh=True)
    print(f"handed task {task} {source.name} -> {name} (fresh)", flush=True)
    time.sleep(args.between)
    home = hand_off(task, fresh, back, args.operator_delay)
    print(f"handed task {task} {name} -> {back.name}", flush=True)
    time.sleep(args.between)
    stop(fresh)
    return [there, home]


def stop(handle: Member) -> None:
    handle.conn.send(("stop", None))
    handle.conn.recv()
    handle.process.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rate", type=int, default=10, help="records per second per partition")
    parser.add_argument("--handoffs", type=int, default=6)
    parser.add_argument(
        "--settle", type=float, default=15.0, help="seconds of input before the first handoff"
    )
    parser.add_argument("--between", type=float, default=8.0, help="seconds between handoffs")
    parser.add_argument("--operator-delay", type=float, default=0.0, help="seconds from ack to assignment")
    parser.add_argument("--no-shared-batches", action="store_true")
    parser.add_argument(
        "--fresh", action="store_true", help="every other handoff to a member started for it (a scale-out)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the working directory (and the logs)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    root = Path(tempfile.mkdtemp(prefix="handoff-"))
    try:
        rows = run(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    text = report(rows, args, (load, os.getloadavg()[0]))
    if args.write:
        args.write.write_text(text)
    print(text)
    if args.keep:
        print(f"executor logs: {root}/a.log, {root}/b.log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
