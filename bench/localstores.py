"""Local store benchmark: the in-memory store, LMDB and RocksDB, at 1M and 20M keys.

The first two are the executor's stores (`MemoryStore`, `LmdbStore`); RocksDB through rocksdict is the
candidate LMDB was chosen over, kept here so the choice can be re-measured.

    .venv/bin/python bench/localstores.py [--write bench/results/localstores.md] [--sizes 1000000,20000000]

For each store and size, in a fresh child process (so peak memory is the store's own): restore a
snapshot of N keys (Parquet read + apply, as a full restore does), fold 20 batches of 10,000 updates to
random existing keys into it (the per-batch merge of a `sum` pipeline: read old values, compute, write
the changed rows), persist it for a local checkpoint, and re-open the persisted copy (what a restarted
member does instead of restoring). Reported: medians, the child's peak resident memory, and the bytes on
disk. The machine's load is written beside the figures: other work shared it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from streamapp.executor.merge import fold, resolve
from streamapp.executor.state.lmdbstore import LmdbStore
from streamapp.executor.state.stores import MemoryStore, rows_table

BATCH = 10_000
BATCHES = 20
STORES = ("memory", "lmdb", "rocksdb")


class RocksStore:
    """RocksDB (rocksdict) as a candidate: write-ahead log off (the shared changelog is one), one write
    batch per upsert, keys counted exactly by a multi-get per batch (RocksDB's own estimate counts
    overwritten versions too)."""

    def __init__(self, directory: Path) -> None:
        path = directory / "rocksdb"
        path.parent.mkdir(parents=True, exist_ok=True)
        options = Options()
        options.create_if_missing(True)
        options.increase_parallelism(2)
        self.db = Rdict(str(path), options)
        self.count = sum(1 for _ in self.db.keys())  # noqa: SIM118 - an Rdict does not iterate its keys
        self.unlogged = WriteOptions()
        self.unlogged.disable_wal = True  # type: ignore[method-assign,assignment]

    def get(self, key: str) -> Any:
        return self.db.get(key)

    def upsert(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        batch = WriteBatch()
        before = self.db.get(list(keys))
        for key, value, old in zip(keys, values, before, strict=True):
            batch.put(key, value)
            self.count += old is None
        self.db.write(batch, self.unlogged)

    def apply_table(self, table: pa.Table) -> int:
        for chunk in table.to_batches(max_chunksize=100_000):
            self.upsert(chunk.column("key").to_pylist(), chunk.column("value").to_pylist())
        return int(table.num_rows)

    def persister(self) -> Any:
        return lambda: self.db.flush(True)

    def close(self) -> None:
        self.db.flush(True)
        self.db.close()


def open_store(kind: str, directory: Path) -> Any:
    if kind == "memory":
        return MemoryStore.load(directory, "long")
    if kind == "lmdb":
        return LmdbStore(directory, "long")
    return RocksStore(directory)


def key_names(count: int) -> list[str]:
    return [f"k{i:09d}" for i in range(count)]


def snapshot_file(root: Path, keys: int) -> Path:
    """A snapshot of `keys` keys (int64 values), written once per size."""
    path = root / f"snapshot-{keys}.parquet"
    if not path.exists():
        pq.write_table(rows_table(dict.fromkeys(key_names(keys), 1), "long"), path, compression="lz4")
    return path


def measure(kind: str, keys: int, snapshot: Path, workdir: Path) -> dict[str, float]:
    """Run in the child: restore, fold batches, persist, re-open; seconds and bytes."""
    figures: dict[str, float] = {}
    directory = workdir / kind
    started = time.perf_counter()
    store = open_store(kind, directory)
    store.apply_table(pq.read_table(snapshot))
    figures["restore_s"] = time.perf_counter() - started
    rng = np.random.default_rng(7)
    sum_merge = resolve("sum")
    merges = []
    for _ in range(BATCHES):
        picked = [f"k{i:09d}" for i in rng.integers(0, keys, BATCH)]
        started = time.perf_counter()
        changed = fold(store, picked, [1] * BATCH, sum_merge)
        store.upsert(list(changed.keys()), list(changed.values()))
        merges.append(time.perf_counter() - started)
    figures["merge_ms"] = statistics.median(merges) * 1000
    started = time.perf_counter()
    store.persister()()
    figures["persist_s"] = time.perf_counter() - started
    figures["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    store.close()
    del store
    figures["disk_mib"] = sum(f.stat().st_blocks * 512 for f in directory.rglob("*") if f.is_file()) / 2**20
    started = time.perf_counter()
    reopened = open_store(kind, directory)
    figures["reopen_s"] = time.perf_counter() - started
    reopened.close()
    return figures


def child(kind: str, keys: int, workdir: Path) -> dict[str, float]:
    """`measure` in a fresh interpreter, so peak memory is this store's alone."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(keys), str(workdir)],
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def baseline_rss() -> float:
    """Peak memory of an interpreter that only imports what every candidate does (MiB)."""
    code = (
        "import resource, pyarrow, pyarrow.parquet, rocksdict, lmdb, numpy; import streamapp.executor.state.stores;"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    return float(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )


def report(sizes: list[int]) -> str:
    load = os.getloadavg()[0]
    lines = [
        "# Local stores: memory, LMDB, RocksDB",
        "",
        f"Made by `bench/localstores.py` on {time.strftime('%Y-%m-%d')}: Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, {platform.machine()}; load average at start {load:.1f} (the machine "
        "was shared with other work, so absolute times are pessimistic; ratios within a row hold).",
        "",
        f"Keys of 10 characters, int64 values. *restore*: read a snapshot of all keys and apply it (a full "
        f"restore); *merge*: median of {BATCHES} batches of {BATCH:,} updates to random existing keys "
        "(`sum`: read, add, write); *persist*: make the store durable for a local checkpoint; *re-open*: "
        "what a restarted member with its volume pays instead of a restore; *peak RSS*: the child "
        f"process's peak resident memory (an interpreter with the same imports: {baseline_rss():.0f} MiB).",
        "",
        "| keys | store | restore (s) | keys/s | merge (ms/batch) | persist (s) | re-open (s) | peak RSS (MiB) "
        "| on disk (MiB) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory(prefix="streamapp-localstores-") as tmp:
        root = Path(tmp)
        for keys in sizes:
            snapshot_file(root, keys)
            for kind in STORES:
                print(f"{kind}: {keys:,} keys …", file=sys.stderr, flush=True)
                workdir = root / f"{kind}-{keys}"
                f = child(kind, keys, workdir)
                shutil.rmtree(workdir, ignore_errors=True)
                lines.append(
                    f"| {keys:,} | {kind} | {f['restore_s']:.1f} | {keys / f['restore_s']:,.0f} "
                    f"| {f['merge_ms']:.0f} | {f['persist_s']:.2f} | {f['reopen_s']:.2f} "
                    f"| {f['peak_rss_mib']:,.0f} | {f['disk_mib']:,.0f} |"
                )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="write the Markdown report here (default: print it)")
    parser.add_argument("--sizes", default="1000000,20000000", help="comma-separated key counts")
    parser.add_argument("--child", nargs=3, metavar=("STORE", "KEYS", "WORKDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, keys, workdir = args.child
        print(
            json.dumps(
                measure(kind, int(keys), Path(workdir).parent / f"snapshot-{keys}.parquet", Path(workdir))
            )
        )
        return 0
    text = report([int(s) for s in args.sizes.split(",")])
    if args.write:
        args.write.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
