"""Big state: a member running the `counts` sample holds and snapshots N keys; its memory beside N.

    .venv/bin/python bench/bigstate.py [--sizes 1000000,1000000:50000000,50000000] [--runs 3] [--resume]
    .venv/bin/python bench/bigstate.py --limit-mib 2048 --sizes 50000000   # in a memory cgroup (root)
    .venv/bin/python bench/bigstate.py --from-raw          # the report again from the committed raw data

A size is N (N records, every key new) or N:R (R records over N keys, each pass over the keys in a
scrambled order): `1000000:50000000` is the like-for-like row for 50M keys, the same records, batches
and snapshots, only fewer keys, so what grows with the state alone shows. For each
size, a file log gets its records, then, each run:

* **hold**: one member (`streamapp dataplane`, LMDB local store, a snapshot every 5 batches of 100,000
  records, so that the smallest size takes snapshots too) processes the whole log: every key is new, so
  the state grows to N keys and every snapshot uploads the 500,000 rows changed since the last;
* **restore**: a second member with no local state starts on the same shared store and restores the
  partition (the newest snapshot and the segments after it), then exits.

Each member's memory is sampled from /proc every 0.2 s: the Python process's resident set split into
anonymous memory (`RssAnon`: what the process allocated; what grows when state is held in memory) and
file-backed pages (`RssFile`: LMDB's memory map, clean page cache the kernel reclaims under pressure),
and the Spark JVM's resident set (bounded by its heap setting). With `--limit-mib` the members run in a
cgroup-v1 memory group of that limit, as a pod's memory limit is, and the group's peak charge and OOM
kills are recorded. Raw figures go to `bench/results/bigstate.json` as each run finishes (`--resume` goes
on from them; otherwise that table starts anew); the report is `bench/results/bigstate.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from streamapp.executor.io.source import FileLog

RESULTS = Path(__file__).parent / "results"
RAW = RESULTS / "bigstate.json"
REPORT = RESULTS / "bigstate.md"
BATCH = 100_000
SNAPSHOT_EVERY = 5
CHUNK = 1_000_000
SAMPLE_SECONDS = 0.2
CGROUPS = Path("/sys/fs/cgroup/memory")
SNAPSHOT_LINE = re.compile(
    r"snapshot at seq (\d+): (\d+) runs, (\d+) rows; uploaded (\d+) bytes in ([\d.]+) s"
)


@dataclass(frozen=True, order=True)
class Size:
    """One row of the table: `records` records over `keys` distinct keys."""

    keys: int
    records: int

    @staticmethod
    def parse(text: str) -> Size:
        keys, _, records = text.partition(":")
        size = Size(int(keys), int(records or keys))
        if size.records < size.keys or size.records % size.keys:
            raise ValueError(f"size {text!r}: the records must be a whole number of passes over the keys")
        return size

    @property
    def name(self) -> str:
        """Its key in the raw data (N alone when every key is new, as recorded before N:R existed)."""
        return str(self.keys) if self.records == self.keys else f"{self.keys}:{self.records}"

    @property
    def label(self) -> str:
        if self.records == self.keys:
            return f"{self.keys:,} keys"
        return f"{self.keys:,} keys over {self.records:,} records"


def write_log(log_dir: Path, size: Size) -> None:
    """The records, key i mod N in a scrambled order (a multiplicative permutation of 0..N-1 per pass)."""
    log = FileLog(log_dir)
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    keys = size.keys
    for start in range(0, size.records, CHUNK):
        count = min(CHUNK, size.records - start)
        names = [f"k{(i * 7_919 + 13) % keys:09d}" for i in range(start, start + count)]
        log.append(
            0,
            pa.table(
                {
                    "timestamp": pa.array([stamp] * count, pa.timestamp("us", tz="UTC")),
                    "key": names,
                    "value": pa.array(["1"] * count),
                }
            ),
        )


def proc_status(pid: int) -> dict[str, int]:
    """The kB fields of /proc/<pid>/status (empty once the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return {}
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            found[name] = int(value.split()[0])
    return found


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Spark's JVM is one)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    found = [int(child) for child in children]
    return found + [grand for child in found for grand in descendants(child)]


def memory_cgroup(limit_mib: int) -> Path:
    """A cgroup-v1 memory group limited to `limit_mib`, as a pod's memory limit is (needs root)."""
    group = CGROUPS / f"streamapp-bigstate-{limit_mib}"
    group.mkdir(exist_ok=True)
    (group / "memory.limit_in_bytes").write_text(str(limit_mib << 20))
    (group / "memory.max_usage_in_bytes").write_text("0")  # reset the peak
    return group


def cgroup_figures(group: Path) -> dict[str, Any]:
    """The group's peak charge (anonymous memory and page cache together) and its OOM kills."""
    control = dict(line.split() for line in (group / "memory.oom_control").read_text().splitlines())
    return {
        "limit_mib": int((group / "memory.limit_in_bytes").read_text()) / 2**20,
        "cgroup_peak_mib": int((group / "memory.max_usage_in_bytes").read_text()) / 2**20,
        "oom_kills": int(control.get("oom_kill", 0)),
    }


def member(workdir: Path, name: str, group: Path | None = None) -> dict[str, Any]:
    """Run one member until it is idle (in memory cgroup `group`, when given); its peak memory (MiB),
    seconds, log figures and state size."""
    local = workdir / f"local-{name}"
    shutil.rmtree(local, ignore_errors=True)
    status = workdir / f"status-{name}.json"
    command = [
        sys.executable, "-m", "streamapp.executor.dataplanecli", "dataplane",
        "--state", str(workdir / "state"), "--log", str(workdir / "log"),
        "--pipeline", "streamapp.executor.samples.counts:counts", "--member", name,
        "--local-state", str(local), "--local-store", "lmdb",
        "--max-batch-records", str(BATCH), "--snapshot-every", str(SNAPSHOT_EVERY),
        "--active", "0=1", "--until-idle", "--status", str(status),
        "--conf", "spark.sql.shuffle.partitions=2",
    ]  # fmt: skip
    peaks = {"python_rss": 0, "python_anon": 0, "python_file": 0, "jvm_rss": 0}
    began = time.monotonic()
    with open(workdir / f"{name}.log", "w") as logfile:
        join = None if group is None else lambda: (group / "cgroup.procs").write_text(str(os.getpid()))
        process = subprocess.Popen(command, stdout=logfile, stderr=subprocess.STDOUT, preexec_fn=join)
        while process.poll() is None:
            own = proc_status(process.pid)
            jvm = sum(proc_status(child).get("VmRSS", 0) for child in descendants(process.pid))
            for key, value in (
                ("python_rss", own.get("VmRSS", 0)),
                ("python_anon", own.get("RssAnon", 0)),
                ("python_file", own.get("RssFile", 0)),
                ("jvm_rss", jvm),
            ):
                peaks[key] = max(peaks[key], value)
            time.sleep(SAMPLE_SECONDS)
    seconds = time.monotonic() - began
    if process.returncode != 0:
        raise RuntimeError(f"member {name} exited {process.returncode}; see {workdir / f'{name}.log'}")
    text = (workdir / f"{name}.log").read_text()
    snapshots = [
        {"seq": int(m[0]), "runs": int(m[1]), "rows": int(m[2]), "bytes": int(m[3]), "seconds": float(m[4])}
        for m in SNAPSHOT_LINE.findall(text)
    ]
    (task,) = json.loads(status.read_text())
    return {
        **(cgroup_figures(group) if group is not None else {}),
        "seconds": seconds,
        **{key: value / 1024 for key, value in peaks.items()},
        "keys": task["keys"],
        "restored_blocking": task["restored_blocking"],
        "snapshots": snapshots,
        "lmdb_mib": du(local) / 2**20,
        "shared_mib": du(workdir / "state" / "runs") / 2**20,
    }


def du(path: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())


def measure(size: Size, runs: int, root: Path, raw: dict[str, Any], limit_mib: int | None) -> None:
    """`runs` hold+restore runs of one size (in a memory cgroup of `limit_mib`, when given), each
    recorded into `raw` as it finishes."""
    workdir = root / f"n{size.name.replace(':', 'x')}"
    if not (workdir / "log").exists():
        print(f"writing a log: {size.label}", flush=True)
        write_log(workdir / "log", size)
    done = raw.setdefault(table_of(limit_mib), {}).setdefault(size.name, [])
    while len(done) < runs:
        shutil.rmtree(workdir / "state", ignore_errors=True)
        load = os.getloadavg()[0]
        group = memory_cgroup(limit_mib) if limit_mib is not None else None
        hold = member(workdir, "hold", group)
        print(f"{size.label}, run {len(done) + 1}: held in {hold['seconds']:.0f} s", flush=True)
        restore = member(workdir, "restore", memory_cgroup(limit_mib) if limit_mib is not None else None)
        print(f"{size.label}, run {len(done) + 1}: restored in {restore['seconds']:.0f} s", flush=True)
        done.append({"hold": hold, "restore": restore, "load_before": load, "load_after": os.getloadavg()[0]})
        RAW.write_text(json.dumps(raw, indent=1) + "\n")


def table_of(limit_mib: int | None) -> str:
    """Where the raw data keeps runs without a limit, and runs in a memory cgroup."""
    return "sizes" if limit_mib is None else "limited"


def spread(values: list[float], digits: int = 0) -> str:
    """Median and range."""
    fmt = f"{{:,.{digits}f}}"
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{fmt.format(mid)} ({fmt.format(low)}–{fmt.format(high)})"


def ratios(table: dict[str, Any], small: str, large: str) -> list[str]:
    """The largest size's peaks over a smaller one's (medians), each figure and the member's own memory."""
    lines = [f"Ratios of {Size.parse(large).label} to {Size.parse(small).label} (medians):", ""]
    for phase in ("hold", "restore"):
        for key, label in (
            ("python_anon", "Python RssAnon"),
            ("python_rss", "Python RSS"),
            ("jvm_rss", "JVM RSS"),
        ):
            a = statistics.median(run[phase][key] for run in table[small])
            b = statistics.median(run[phase][key] for run in table[large])
            if not a:
                continue  # a restore with no input left never starts Spark
            lines.append(f"- {phase}, {label}: {b / a:.2f}× ({a:,.0f} → {b:,.0f} MiB)")
    own = [
        statistics.median(run["hold"]["python_anon"] + run["hold"]["jvm_rss"] for run in table[size])
        for size in (small, large)
    ]
    lines += [
        f"- hold, the member's own memory (Python RssAnon + JVM RSS): {own[1] / own[0]:.2f}× "
        f"({own[0]:,.0f} → {own[1]:,.0f} MiB)",
        "",
    ]
    return lines


def report(raw: dict[str, Any]) -> str:
    sizes = [size.name for size in sorted(map(Size.parse, raw["sizes"]))]
    lines = [
        "# Big state: memory of a member beside the keys it holds",
        "",
        f"Regenerate: `.venv/bin/python bench/bigstate.py --from-raw` (raw: `bench/results/bigstate.json`, "
        f"measured {raw['date']} on {raw['machine']}). Medians of {raw['runs']} runs, range in brackets; "
        "MiB. The `counts` sample on one partition, LMDB local store, batches of "
        f"{BATCH:,} records, a snapshot every {SNAPSHOT_EVERY} batches. A row of N keys processes N records, "
        "every key new, so the state grows to N keys; a row of N keys over R records passes over the same "
        "N keys R/N times (the same input, batches and snapshots as the R-key row, with a state of N keys).",
        "",
        "| state | phase | seconds | Python RssAnon | Python RssFile (LMDB map) | Python RSS | Spark JVM RSS |"
        " LMDB on disk | runs in the store |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        for phase in ("hold", "restore"):
            rows = [run[phase] for run in raw["sizes"][size]]
            cells = [spread([row[key] for row in rows]) for key in (
                "seconds", "python_anon", "python_file", "python_rss", "jvm_rss", "lmdb_mib", "shared_mib"
            )]  # fmt: skip
            lines.append(f"| {Size.parse(size).label} | {phase} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "How to read it: *RssAnon* is the memory the member process allocated (Python objects, Arrow "
        "buffers, LMDB's dirty pages of a write transaction); it is what would grow if the state were held "
        "in memory, and what a snapshot of the whole state as one table used to cost. *RssFile* is LMDB's "
        "memory map: pages of the store's file the process touched, clean page cache that counts in RSS "
        "while mapped but that the kernel reclaims under memory pressure (see the run under a memory limit "
        "below for what that costs). The Spark JVM's resident "
        "set is bounded by its heap setting (`spark.driver.memory`, 1g by default). The restore member "
        "never starts Spark (there is no input left to process), so its JVM column is 0.",
        "",
    ]
    large = sizes[-1]
    for small in sizes[:-1]:
        lines += ratios(raw["sizes"], small, large)
    snaps = raw["sizes"][large][0]["hold"]["snapshots"]
    uploads = [snap["bytes"] / 2**20 for snap in snaps]
    lines += [
        "",
        f"Snapshots of the largest size, first run: {len(snaps)}, each uploading the rows changed since the "
        f"previous one and the runs it merged: median {statistics.median(uploads):,.1f} MiB, "
        f"{sum(uploads):,.0f} MiB in all for a final {snaps[-1]['rows']:,} rows in {snaps[-1]['runs']} runs. "
        "The largest, when a merge reached the oldest run:",
        "",
        "| seq | runs after | rows listed | uploaded MiB | seconds |",
        "|---:|---:|---:|---:|---:|",
    ]
    for snap in sorted(snaps, key=lambda snap: snap["bytes"], reverse=True)[:5]:
        lines.append(
            f"| {snap['seq']} | {snap['runs']} | {snap['rows']:,} | {snap['bytes'] / 2**20:,.1f} | {snap['seconds']:.1f} |"
        )
    seen = raw.get("limited_observation")
    if seen:
        lines += [
            "",
            f"Under a memory limit (one run, stopped): the {seen['keys']:,}-key hold in a cgroup of "
            f"{seen['limit_mib']:,} MiB, less than the process memory plus LMDB's file. It was never "
            f"OOM-killed ({seen['oom_kills']} kills; the group's charge sat at the limit, {seen['cgroup_peak_mib']:,} "
            "MiB, the kernel reclaiming LMDB's pages), but once the store's pages no longer fitted in the page "
            "cache left beside the processes, each batch's random keys faulted them in from disk: "
            f"{seen['major_faults']:,} major faults, {seen['iowait_percent']}% I/O wait, and the member went from "
            f"{seen['keys_per_minute_before']:,} to {seen['keys_per_minute_after']:,} keys a minute near "
            f"{seen['keys_reached']:,} keys, where it was stopped after {seen['minutes']} minutes. Memory is "
            "bounded; speed with random keys needs the store's working set in page cache: size a member's "
            "memory limit to its processes plus the LMDB file of its hot keys.",
        ]
    loads = [
        f"{run['load_before']:.1f}→{run['load_after']:.1f}" for size in sizes for run in raw["sizes"][size]
    ]
    lines += ["", f"Load average before→after each run: {', '.join(loads)}.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000000,1000000:50000000,50000000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "streamapp-bigstate")
    parser.add_argument(
        "--limit-mib", type=int, help="run the members in a memory cgroup of this limit (root, cgroup v1)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the runs already recorded and add the rest"
    )
    parser.add_argument("--from-raw", action="store_true")
    args = parser.parse_args()
    if not args.from_raw:
        raw = json.loads(RAW.read_text()) if RAW.exists() else {}
        if not args.resume:
            raw.pop(table_of(args.limit_mib), None)
        raw.update(
            date=datetime.now(UTC).strftime("%Y-%m-%d"),
            machine=f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            runs=args.runs,
        )
        for size in sorted(Size.parse(s) for s in args.sizes.split(",")):
            measure(size, args.runs, args.workdir, raw, args.limit_mib)
    REPORT.write_text(report(json.loads(RAW.read_text())))
    print(REPORT.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
