"""A fresh executor's first batches: what `pipeline.warm_up` saves a task handed to a new member.

Each run is a new Python process with a new Spark session (as a new pod is): it runs the warm-up
(or none), then times batches of one partition read from a file log, each as its own job (a round
with one due partition, what a member given a single task runs), then rounds of two partitions in one
shared job. Runs of each variant alternate, so both see the same machine. `PYTHONPATH=<other
checkout>/operator` measures another version's warm-up.

    .venv/bin/python bench/firstbatch.py --runs 3 --write bench/results/firstbatch.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

VARIANTS = ("none", "warm-up")
ALONE, SHARED, RECORDS = 4, 2, 40


def child(variant: str) -> dict[str, object]:
    """One fresh session: its warm-up, then the batches' seconds."""
    from streamapp.executor import pipeline as pipelines
    from streamapp.executor.io.source import FileLog
    from streamapp.executor.spark import session

    log = FileLog(Path(tempfile.mkdtemp(prefix="firstbatch-")))
    now = pa.array([dt.datetime.now(dt.UTC)] * RECORDS, pa.timestamp("us", tz="UTC"))
    for partition in range(3):
        for _ in range(ALONE):
            log.append(
                partition,
                pa.table(
                    {
                        "timestamp": now,
                        "key": [f"k{i % 17}" for i in range(RECORDS)],
                        "value": ["1"] * RECORDS,
                    }
                ),
            )
    counts = pipelines.load("streamapp.executor.samples.counts:counts")
    spark = session()
    began = time.monotonic()
    if variant == "warm-up":
        pipelines.warm_up(counts, spark)
    warm = time.monotonic() - began
    alone = [
        _timed(
            lambda i=i: pipelines.keyed_updates(counts, log.read(spark, 0, i * RECORDS, (i + 1) * RECORDS))
        )
        for i in range(ALONE)
    ]
    shared = [
        _timed(
            lambda i=i: pipelines.keyed_updates_by_partition(
                counts, {p: log.read(spark, p, i * RECORDS, (i + 1) * RECORDS) for p in (1, 2)}
            )
        )
        for i in range(SHARED)
    ]
    return {"variant": variant, "warm_up_s": warm, "alone_s": alone, "shared_s": shared}


def _timed(job: object) -> float:
    began = time.monotonic()
    job()  # type: ignore[operator]
    return time.monotonic() - began


def measure(runs: int) -> list[dict[str, object]]:
    results = []
    for index in range(runs):
        for variant in VARIANTS if index % 2 == 0 else reversed(VARIANTS):
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant], check=True, capture_output=True, text=True
            ).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
            print(variant, results[-1], flush=True)
    return results


def report(results: list[dict[str, object]], load: tuple[float, float]) -> str:
    lines = [
        "# A fresh executor's first batches, with and without the warm-up",
        "",
        f"`bench/firstbatch.py` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
        f"{os.cpu_count()} cores, load average {load[0]:.1f} at start and {load[1]:.1f} at end. Each run is a new "
        f"process and Spark session; {ALONE} batches of one partition ({RECORDS} records each, read from a file "
        f"log, each its own job: a round of a member owning one task), then {SHARED} rounds of two partitions "
        "in one shared job. Seconds, median over runs (min–max).",
        "",
        "| variant | runs | warm-up | 1st single batch | 2nd | 3rd | 4th | 1st shared round | 2nd |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        mine = [r for r in results if r["variant"] == variant]
        columns = [[float(r["warm_up_s"]) for r in mine]]  # type: ignore[arg-type]
        columns += [[float(r["alone_s"][i]) for r in mine] for i in range(ALONE)]  # type: ignore[index]
        columns += [[float(r["shared_s"][i]) for r in mine] for i in range(SHARED)]  # type: ignore[index]
        cells = " | ".join(f"{statistics.median(c):.2f} ({min(c):.2f}–{max(c):.2f})" for c in columns)
        lines.append(f"| {variant} | {len(mine)} | {cells} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per variant")
    parser.add_argument("--write", type=Path, help="write the table here (markdown)")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    load_start = os.getloadavg()[0]
    results = measure(args.runs)
    text = report(results, (load_start, os.getloadavg()[0]))
    print(text)
    if args.write:
        args.write.write_text(text)


if __name__ == "__main__":
    main()
