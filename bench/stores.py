"""Shared-store benchmark: the filesystem store vs the S3 store (the real test S3 server on loopback),
same input, same batch sizes, same SparkSession, run back to back.

    .venv/bin/python bench/stores.py [--write bench/results/stores.md] [--quick]

Prints Markdown (see NOTE); data lives in a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import benchreport

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from dataplane import COUNTS, machine, timed, write_history
from s3server import server
from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.sink import FileSink
from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.spark import session
from streamapp.executor.state import s3store
from streamapp.executor.state.blobstore import BlobStore, FileStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.replica import rebuild
from streamapp.executor.task import TaskConfig

NOTE = """\
Per store: micro-batch latency of the keyed running count (a batch = read the input, Spark fold,
changelog segment, output file, commit manifest; one executor, both partitions active) and the restore
rate of one partition (newest snapshot + 10 changelog segments). The S3 server is SeaweedFS
(`e2e/s3server`, `weed mini`) on 127.0.0.1: its figures show the cost of the S3 API path (HTTP, request
signing, the server's own storage), not of AWS S3 over a network, where each request adds a round trip."""


RUNS = 3


def spread(values: list[float], digits: int = 0) -> str:
    """The median of the runs, and their range in brackets."""
    return f"{statistics.median(values):,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def batch_run(store: BlobStore, log: FileLog, per_batch: int) -> tuple[list[float], float]:
    """Both partitions active on one executor until the log is consumed: per-batch wall times (ms) and
    input records per second."""
    executor = Executor(
        StateLayout(store.child("state")),
        log,
        FileSink(store.child("outputs")),
        pipelines.load(COUNTS),
        TaskConfig(max_batch_records=per_batch, snapshot_every=20),
    )
    executor.apply(Target(active={0: 1, 1: 1}))
    executor.step()
    batch_ms: list[float] = []
    records = sum(log.end_offset(p) for p in (0, 1))
    began = time.perf_counter()
    busy = True
    while busy:
        busy = False
        for partition in (0, 1):
            start = time.perf_counter()
            if executor.tasks[partition].step():
                batch_ms.append(1000 * (time.perf_counter() - start))
                busy = True
    executor.context.background.wait()
    return batch_ms, records / (time.perf_counter() - began)


def batch_row(label: str, per_batch: int, runs: list[tuple[list[float], float]]) -> str:
    """Median p50 and p95 and throughput over the runs, with the range of p50 and of throughput."""
    p50s = [statistics.median(ms) for ms, _ in runs]
    p95s = [statistics.quantiles(ms, n=20)[-1] if len(ms) >= 20 else max(ms) for ms, _ in runs]
    return (
        f"| {label} | {per_batch:,} | {len(runs[0][0])} | {spread(p50s)} | {statistics.median(p95s):,.0f} "
        f"| {spread([rate for _, rate in runs])} |"
    )


def restore_row(store: BlobStore, label: str, keys: int) -> str:
    """The same history restored `RUNS` times, each written anew under its own folder."""
    seconds = []
    for run in range(RUNS):
        layout = StateLayout(store.child(f"restore-{run}"))
        write_history(layout, keys, 10, snapshot=True)
        with timed() as took:
            replica = rebuild(layout, 0)
        assert len(replica.state) == keys
        seconds.append(took[0])
    return f"| {label} | {keys:,} | {spread(seconds, 2)} | {spread([2 * keys / s for s in seconds])} |"


def main(argv: list[str] | None = None) -> int:
    args = benchreport.arguments(__doc__ or "", argv)
    scale = 10 if args.quick else 1
    records, restore_keys = 200_000 // scale, 500_000 // scale
    command = " ".join(["python", "bench/stores.py", *(argv if argv is not None else sys.argv[1:])])
    session()
    root = Path(tempfile.mkdtemp(prefix="streamapp-bench-stores-"))
    s3 = server.start(root / "s3server")
    try:
        lines = [
            "# Shared-store benchmark: filesystem vs S3",
            "",
            f"Produced by `.venv/bin/{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
            "",
            f"Machine: {machine()}.",
            "",
            NOTE,
            "",
        ]
        stores: list[tuple[str, BlobStore]] = [("filesystem", FileStore(root / "fs"))]
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        os.environ.update(s3.env())  # the standard AWS variables, as an executor pod gets them
        s3_client = s3store.client_from_env()
        s3_client.create_bucket(Bucket=bucket)
        stores.append(("S3 (test server, loopback)", s3store.S3Store(s3_client, bucket, "bench")))
        lines += [
            f"## Micro-batch latency ({records:,} records over 2 partitions, 5,000 keys)",
            "",
            f"Each case run {RUNS} times, the stores taking turns: the median, and the range in brackets.",
            "",
            "| store | records/batch | batches | p50 ms/batch | p95 ms/batch | records/s |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        # The first batches of a session pay for JIT and Spark's planning caches: spend them on a
        # throwaway run, so neither store's first measured batch size carries them.
        warm = FileLog(root / "log-warmup")
        generate(warm, GenerateSpec(partitions=2, count=20_000, keys=5_000, seed=3, chunk=2_000))
        batch_run(FileStore(root / "warmup"), warm, 1_000)
        for per_batch in (1_000, 10_000):
            log = FileLog(root / f"log-{per_batch}")
            generate(log, GenerateSpec(partitions=2, count=records, keys=5_000, seed=7, chunk=2 * per_batch))
            runs: dict[str, list[tuple[list[float], float]]] = {label: [] for label, _ in stores}
            for run in range(RUNS):  # the stores take turns within each run
                for label, store in stores:
                    runs[label].append(batch_run(store.child(f"b{per_batch}-{run}"), log, per_batch))
            lines += [batch_row(label, per_batch, runs[label]) for label, _ in stores]
        lines += [
            "",
            "## Restore (newest snapshot + 10 changelog segments, one partition)",
            "",
            f"Each restore run {RUNS} times: the median, and the range in brackets.",
            "",
            "| store | keys | seconds | rows applied/s |",
            "|---|---:|---:|---:|",
        ]
        lines += [restore_row(store, label, restore_keys) for label, store in stores]
        lines += ["", f"Load average at the end: {os.getloadavg()[0]:.1f}."]
    finally:
        server.stop(root / "s3server")
        shutil.rmtree(root, ignore_errors=True)
    benchreport.emit(lines, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
