"""Memory limit: a member's throughput holding 1M or 50M keys inside a pod's memory limit, against the
same member without one.

    make bench-memory-limit    # or: .venv/bin/python bench/memorylimit.py [--runs 3] [--resume] (root, cgroup v1)
    .venv/bin/python bench/memorylimit.py --from-raw     # the report again from the committed raw data

What a Kubernetes user sizes is a pod's memory limit, and what it charges is everything the member's
processes touch: their anonymous memory (which cannot be reclaimed: over the limit, the OOM killer) and
the page cache of the files they read and write, LMDB's above all (reclaimable, but a page dropped is a
page read again). So each case runs one member (`streamapp dataplane`, the `counts` sample, LMDB local
store, one partition, batches of 100,000 records, a snapshot every 5 batches) in a cgroup-v1 memory
group of its own, as a pod's container is, and records what kubelet and the user see:

* **seed** (once per size): the shared store gets a snapshot of N keys (`k000000000`..), written
  through the snapshot module's own run writer, so every case starts from the same state; each case
  works on a hard-linked copy of it (the store's files are never rewritten in place);
* **log** (once per size and distribution): `--records` records whose keys are drawn over the N keys,
  uniformly or Zipf-distributed (exponent 0.99, YCSB's; ranks scattered over the key space by a
  multiplicative permutation, so hot keys do not share pages);
* **a case**: caches dropped, the member restores the snapshot into its LMDB store and processes the
  whole log. Throughput is records over the time between its first commit and its last (restore and
  Spark's start are reported apart). Sampled every 0.2 s: the group's usage, its working set as kubelet
  computes it (usage less inactive file pages: what `kubectl top`, eviction and VPA see) and major
  faults; at the end, OOM kills. A case still running after `--timeout` seconds is stopped, its rate
  taken over the commits it made (a member that thrashes can take hours).

The 1M-key member runs first without a limit: its peak working set (median of the runs) is the
*footprint* a user would measure on a small app. The limit of every limited case is 1.5x that footprint,
and each run measures every size and distribution without the limit and with it, side by side, so
a ratio compares two members that saw the same machine at nearly the same time. Raw figures go to
`bench/results/memory-limit.json` as each case ends; the report is `bench/results/memory-limit.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bigstate import descendants, proc_status
from streamapp.executor.io.source import FileLog
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state import runs, snapshots
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head, Kind, Manifest
from streamapp.executor.state.stores import arrow_type

RESULTS = Path(__file__).parent / "results"
RAW = RESULTS / "memory-limit.json"
REPORT = RESULTS / "memory-limit.md"
CGROUPS = Path("/sys/fs/cgroup/memory")
DISTRIBUTIONS = ("zipf", "uniform")
ZIPF_EXPONENT = 0.99
LIMIT_FACTOR = 1.5
BATCH = 100_000
SNAPSHOT_EVERY = 5
CHUNK = 1_000_000
SAMPLE_SECONDS = 0.2
GOAL_RATIO = 0.7
JVM_OPTIONS = "-XX:+UseSerialGC"
"""Spark's JVM on both sides of a pair: under a limit below 1,792 MiB the JVM picks the serial collector
by itself (not a "server-class" machine), without one G1; left to choose, the 1M-key member ran up to
1.2x faster limited than not (one run, 2026-12-06), which measured the collector, not the memory."""


def key_name(index: int) -> str:
    return f"k{index:09d}"


def seed(state: Path, keys: int) -> None:
    """A shared store holding a snapshot of `keys` keys (count 1 each) after commit 0 of epoch 1."""
    layout = StateLayout(state)
    manifests.create(layout, 0, Manifest(seq=0, epoch=1, kind=Kind.BATCH, start=0, end=0))

    def chunks() -> Iterator[pa.Table]:
        for start in range(0, keys, CHUNK):
            names = [key_name(i) for i in range(start, min(keys, start + CHUNK))]
            yield pa.table({"key": names, "value": pa.array([1] * len(names), pa.int64())})

    run = runs.write(layout.store, runs.unique_name(layout.runs(0), 0), arrow_type("long"), chunks())
    snapshots.publish(layout, 0, snapshots.Snapshot(Head(seq=0, offset=0, epoch=1), (run,)), frozenset())


def draw(keys: int, records: int, distribution: str, rng: np.random.Generator) -> np.ndarray[Any, Any]:
    """Key indexes of `records` records: uniform, or Zipf ranks scattered over the key space."""
    if distribution == "uniform":
        return rng.integers(0, keys, records)
    cdf = np.cumsum(np.arange(1, keys + 1, dtype=np.float64) ** -ZIPF_EXPONENT)
    ranks = np.searchsorted(cdf, rng.random(records) * cdf[-1])
    del cdf
    return (ranks.astype(np.int64) * 7_919 + 13) % keys


def write_log(log_dir: Path, keys: int, records: int, distribution: str) -> None:
    log = FileLog(log_dir)
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    indexes = draw(keys, records, distribution, np.random.default_rng(44))
    for start in range(0, records, CHUNK):
        part = indexes[start : start + CHUNK]
        log.append(
            0,
            pa.table(
                {
                    "timestamp": pa.array([stamp] * len(part), pa.timestamp("us", tz="UTC")),
                    "key": [key_name(int(i)) for i in part],
                    "value": pa.array(["1"] * len(part)),
                }
            ),
        )


@dataclass
class Group:
    """A cgroup-v1 memory group for one member, as a pod's container has (needs root)."""

    path: Path

    @staticmethod
    def make(name: str, limit_mib: int | None) -> Group:
        path = CGROUPS / f"streamapp-memorylimit-{name}"
        if path.exists():
            path.rmdir()
        path.mkdir()
        (path / "memory.limit_in_bytes").write_text("-1" if limit_mib is None else str(limit_mib << 20))
        return Group(path)

    def stat(self) -> dict[str, int]:
        return {
            k: int(v)
            for k, v in (line.split() for line in (self.path / "memory.stat").read_text().splitlines())
        }

    def usage(self) -> int:
        return int((self.path / "memory.usage_in_bytes").read_text())

    def working_set(self) -> int:
        """kubelet's figure: usage less the inactive file pages (what it would reclaim first)."""
        return max(0, self.usage() - self.stat()["total_inactive_file"])

    def oom_kills(self) -> int:
        control = dict(line.split() for line in (self.path / "memory.oom_control").read_text().splitlines())
        return int(control.get("oom_kill", 0))

    def remove(self) -> None:
        """Once its processes are gone (Spark's JVM may outlive the member by a moment)."""
        for _ in range(300):
            left = (self.path / "cgroup.procs").read_text().split()
            if not left:
                self.path.rmdir()
                return
            time.sleep(0.1)
        raise RuntimeError(f"processes {left} still in {self.path}")


def applied(status: Path) -> int:
    """The partition's applied offset as the member last reported it (0 before its first report)."""
    try:
        (task,) = json.loads(status.read_text())
    except (FileNotFoundError, ValueError):
        return 0
    return int(task["applied_offset"])


def case(
    workdir: Path, seeded: Path, log_dir: Path, records: int, limit_mib: int | None, timeout: float
) -> dict[str, Any]:
    """One member from a fresh copy of the seeded store through the whole log, in a group of its own;
    stopped after `timeout` seconds (a thrashing member can take hours), its rate then taken over the
    commits it made."""
    state, local, status = workdir / "state", workdir / "local", workdir / "status.json"
    for path in (state, local):
        shutil.rmtree(path, ignore_errors=True)
    status.unlink(missing_ok=True)
    subprocess.run(["cp", "-al", str(seeded), str(state)], check=True)
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3")
    group = Group.make("limited" if limit_mib else "unlimited", limit_mib)
    command = [
        sys.executable, "-m", "streamapp.executor.dataplanecli", "dataplane",
        "--state", str(state), "--log", str(log_dir),
        "--pipeline", "streamapp.executor.samples.counts:counts", "--member", "m",
        "--local-state", str(local), "--local-store", "lmdb",
        "--max-batch-records", str(BATCH), "--snapshot-every", str(SNAPSHOT_EVERY),
        "--active", "0=1", "--until-idle", "--status", str(status),
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", f"spark.driver.extraJavaOptions={JVM_OPTIONS}",
    ]  # fmt: skip
    faults_before = group.stat()["total_pgmajfault"]
    peaks = {"usage": 0, "working_set": 0, "python_anon": 0, "jvm_rss": 0}
    first: tuple[float, int] | None = None
    last: tuple[float, int] = (0.0, 0)
    began = time.monotonic()
    with open(workdir / "member.log", "w") as logfile:
        join = lambda: (group.path / "cgroup.procs").write_text(str(os.getpid()))  # noqa: E731
        process = subprocess.Popen(
            command, stdout=logfile, stderr=subprocess.STDOUT, preexec_fn=join, start_new_session=True
        )
        while process.poll() is None:
            if time.monotonic() - began > timeout:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                break
            now, offset = time.monotonic() - began, applied(status)
            if offset and first is None:
                first = (now, offset)
            if offset > last[1]:
                last = (now, offset)
            jvm = sum(proc_status(child).get("VmRSS", 0) for child in descendants(process.pid))
            for key, value in (
                ("usage", group.usage() >> 10),
                ("working_set", group.working_set() >> 10),
                ("python_anon", proc_status(process.pid).get("RssAnon", 0)),
                ("jvm_rss", jvm),
            ):
                peaks[key] = max(peaks[key], value)
            time.sleep(SAMPLE_SECONDS)
    oom_kills = group.oom_kills()
    faults = group.stat()["total_pgmajfault"] - faults_before
    group.remove()
    shutil.rmtree(local, ignore_errors=True)
    done = applied(status)
    result: dict[str, Any] = {
        "limit_mib": limit_mib,
        "finished": process.returncode == 0 and done == records,
        "returncode": process.returncode,
        "oom_kills": oom_kills,
        "major_faults": faults,
        "records_done": done,
        "seconds": time.monotonic() - began,
        **{f"peak_{key}_mib": value / 1024 for key, value in peaks.items()},
    }
    if first is not None and last[0] > first[0]:
        result["first_commit_seconds"] = first[0]
        result["records_per_second"] = (last[1] - first[1]) / (last[0] - first[0])
    return result


@dataclass(frozen=True)
class Inputs:
    sizes: tuple[int, ...]
    seeded: dict[int, Path]
    logs: dict[tuple[int, str], Path]


def prepare(root: Path, sizes: tuple[int, ...], records: int) -> Inputs:
    seeded, logs = {}, {}
    for keys in sizes:
        seeded[keys] = root / f"seed-{keys}"
        if not (seeded[keys] / "snapshots").exists():
            print(f"seeding a store of {keys:,} keys", flush=True)
            shutil.rmtree(seeded[keys], ignore_errors=True)
            seed(seeded[keys], keys)
        for distribution in DISTRIBUTIONS:
            logs[keys, distribution] = root / f"log-{keys}-{distribution}-{records}"
            if not logs[keys, distribution].exists():
                print(f"writing a log: {records:,} records over {keys:,} keys, {distribution}", flush=True)
                write_log(logs[keys, distribution], keys, records, distribution)
    return Inputs(sizes, seeded, logs)


def row(raw: dict[str, Any], keys: int, distribution: str) -> dict[str, Any]:
    """The raw row of one size and distribution (made on first use)."""
    for found in raw["rows"]:
        if found["keys"] == keys and found["distribution"] == distribution:
            return found  # type: ignore[no-any-return]
    made: dict[str, Any] = {"keys": keys, "distribution": distribution, "runs": []}
    raw["rows"].append(made)
    return made


def save(raw: dict[str, Any]) -> None:
    RAW.write_text(json.dumps(raw, indent=1) + "\n")


def measure(raw: dict[str, Any], inputs: Inputs, root: Path, runs_wanted: int, timeout: float) -> None:
    """The footprint first (the smallest size, no limit), then every row side by side, one run at a
    time."""
    records, small = raw["records"], inputs.sizes[0]
    footprints = raw.setdefault("footprints_1m", {})
    for distribution in DISTRIBUTIONS:
        peaks = footprints.setdefault(distribution, [])
        while len(peaks) < runs_wanted:
            result = case(
                root, inputs.seeded[small], inputs.logs[small, distribution], records, None, timeout
            )
            peaks.append(result["peak_working_set_mib"])
            print(f"footprint, {small:,} keys, {distribution}: {peaks[-1]:,.0f} MiB", flush=True)
            save(raw)
    for index in range(runs_wanted):
        for keys in inputs.sizes:
            for distribution in DISTRIBUTIONS:
                found = row(raw, keys, distribution)
                footprint = statistics.median(footprints[distribution])
                found.update(footprint_1m_mib=footprint, limit_mib=int(LIMIT_FACTOR * footprint))
                if len(found["runs"]) > index:
                    continue
                load = os.getloadavg()[0]
                pair = {
                    name: case(
                        root, inputs.seeded[keys], inputs.logs[keys, distribution], records, limit, timeout
                    )
                    for name, limit in (("unlimited", None), ("limited", found["limit_mib"]))
                }
                rates = [pair[name].get("records_per_second") for name in ("unlimited", "limited")]
                ratio = rates[1] / rates[0] if rates[0] and rates[1] else 0.0
                found["runs"].append(
                    {
                        "throughput_ratio": ratio,
                        "oom_kills": pair["limited"]["oom_kills"],
                        **pair,
                        "load_before": load,
                        "load_after": os.getloadavg()[0],
                    }
                )
                print(
                    f"run {index + 1}, {keys:,} keys, {distribution}: ratio {ratio:.2f} "
                    f"({rates[1] or 0:,.0f} against {rates[0] or 0:,.0f} records/s), "
                    f"{pair['limited']['oom_kills']} OOM kills",
                    flush=True,
                )
                save(raw)


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    if not values:
        return "—"
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def report(raw: dict[str, Any]) -> str:
    lines = [
        "# A member under a pod's memory limit",
        "",
        f"Regenerate: `.venv/bin/python bench/memorylimit.py --from-raw` (raw: `bench/results/memory-limit.json`, "
        f"measured {raw['date']} at commit {raw['commit']} on {raw['machine']}). How it is measured: the "
        "docstring of `bench/memorylimit.py`. One member, the `counts` sample on one partition, LMDB local "
        f"store, {raw['records']:,} records in batches of {BATCH:,}, a snapshot every {SNAPSHOT_EVERY} "
        f"batches, Spark's JVM with `{raw.get('jvm_options', 'its own choices')}` on both sides. Medians of "
        "the runs, range in brackets.",
        "",
        f"Footprint of the {raw['sizes'][0]:,}-key member without a limit (peak working set, MiB): "
        + ", ".join(f"{d} {spread(raw['footprints_1m'][d])}" for d in DISTRIBUTIONS)
        + f". Every limited case runs in {LIMIT_FACTOR}x that.",
        "",
        "| keys | keys drawn | limit MiB | records/s, no limit | records/s, limited | ratio | OOM kills |"
        " major faults, no limit → limited | peak working set MiB, no limit → limited | first commit s,"
        " no limit → limited |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for found in sorted(raw["rows"], key=lambda r: (r["keys"], r["distribution"] != "zipf")):
        done = found["runs"]

        def figures(side: str, key: str, done: list[dict[str, Any]] = done) -> list[float]:
            return [run[side][key] for run in done if key in run[side]]

        lines.append(
            f"| {found['keys']:,} | {found['distribution']} | {found['limit_mib']:,} "
            f"| {spread(figures('unlimited', 'records_per_second'))} "
            f"| {spread(figures('limited', 'records_per_second'))} "
            f"| {spread([run['throughput_ratio'] for run in done], '{:.2f}')} "
            f"| {sum(run['oom_kills'] for run in done)} "
            f"| {spread(figures('unlimited', 'major_faults'))} → {spread(figures('limited', 'major_faults'))} "
            f"| {spread(figures('unlimited', 'peak_working_set_mib'))} → "
            f"{spread(figures('limited', 'peak_working_set_mib'))} "
            f"| {spread(figures('unlimited', 'first_commit_seconds'), '{:.0f}')} → "
            f"{spread(figures('limited', 'first_commit_seconds'), '{:.0f}')} |"
        )
    stopped = [
        f"{found['keys']:,} keys, {found['distribution']}, run {index + 1}, {side}"
        for found in raw["rows"]
        for index, run in enumerate(found["runs"])
        for side in ("unlimited", "limited")
        if not run[side].get("finished", True)
    ]
    if stopped:
        lines += ["", "Stopped at the timeout, rate over the commits made: " + "; ".join(stopped) + "."]
    goal = [r for r in raw["rows"] if r["keys"] == raw["sizes"][-1] and r["distribution"] == "zipf"]
    if goal:
        ratios = [run["throughput_ratio"] for run in goal[0]["runs"]]
        kills = sum(run["oom_kills"] for run in goal[0]["runs"])
        met = bool(ratios) and min(ratios) >= GOAL_RATIO and kills == 0
        lines += [
            "",
            f"Goal: {raw['sizes'][-1]:,} Zipf-drawn keys within {LIMIT_FACTOR}x the {raw['sizes'][0]:,}-key footprint keep at least "
            f"{GOAL_RATIO:.0%} of the unlimited throughput with no OOM kill, in every run: "
            f"**{'met' if met else 'not met'}** (lowest ratio {min(ratios, default=0):.2f}, {kills} OOM kills).",
        ]
    loads = [
        f"{run['load_before']:.1f}→{run['load_after']:.1f}" for found in raw["rows"] for run in found["runs"]
    ]
    lines += ["", f"Load average before→after each pair: {', '.join(loads)}.", ""]
    return "\n".join(lines)


def commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument(
        "--sizes", default="1000000,50000000", help="key counts; the first sets the footprint"
    )
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "streamapp-memorylimit")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a case may run")
    parser.add_argument("--resume", action="store_true", help="keep the cases already recorded, add the rest")
    parser.add_argument("--from-raw", action="store_true")
    args = parser.parse_args()
    if not args.from_raw:
        if not CGROUPS.exists():
            parser.error(f"{CGROUPS} is missing: this benchmark needs root and cgroup v1's memory controller")
        raw = json.loads(RAW.read_text()) if args.resume and RAW.exists() else {}
        sizes = tuple(sorted(int(size) for size in args.sizes.split(",")))
        if raw and (raw["records"], tuple(raw["sizes"])) != (args.records, sizes):
            parser.error("--resume: the recorded runs had other --records or --sizes")
        raw.update(
            date=datetime.now(UTC).strftime("%Y-%m-%d"),
            commit=commit(),
            machine=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            records=args.records,
            sizes=list(sizes),
            jvm_options=JVM_OPTIONS,
        )
        raw.setdefault("rows", [])
        args.workdir.mkdir(parents=True, exist_ok=True)
        measure(raw, prepare(args.workdir, sizes, args.records), args.workdir, args.runs, args.timeout)
    REPORT.write_text(report(json.loads(RAW.read_text())))
    print(REPORT.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
