"""Replaying a long delta from S3: one request at a time, read ahead, and a full restore instead.

    .venv/bin/python bench/replay.py [--minutes 60] [--rtt-ms 20] [--runs 3] [--write bench/results/replay.md]
    .venv/bin/python bench/replay.py --from-raw bench/results/replay.json --write bench/results/replay.md

A member back after a long absence replays every batch its task committed meanwhile: one manifest and
one segment per batch. The history here is `--minutes` of a busy task committing a batch a second,
each batch rewriting `--batch-keys` keys drawn (Zipf, s=1.1) from `--keys`, after a snapshot of all of
them; it is written to the real test S3 server (SeaweedFS) over loopback. The copy then reads it
through a proxy that holds every chunk each way for half of `--rtt-ms`: an object store's round trip,
which loopback does not have. Per run, back to back on the same history and the same server:

- `one at a time`: the replay as it was, each manifest then its segment read in turn
  (`executor/state/prefetch.py` with a window of one);
- `read ahead`: up to `MOST_AHEAD` manifests and their segments in flight while earlier ones apply;
- `full restore`: the newest snapshot, written at the head after the replays (what a copy reads when
  the delta holds more bytes than it: `fullRestoreReason: delta-larger`).

Each case is timed from an empty copy that has loaded the first snapshot (its load is not counted) to
the head. Raw figures go to the JSON beside the report (`--write`'s name with `.json`), from which
`--from-raw` writes the report again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from dataplane import machine
from s3server import server
from streamapp.executor.state import changelog, prefetch, s3store, snapshots
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head, Kind, Manifest
from streamapp.executor.state.replica import Replica
from streamapp.executor.state.stores import rows_table

CASES = ("one at a time", "read ahead", "full restore")


class LatencyProxy:
    """A TCP proxy on loopback that delivers every chunk, each way, `delay` seconds after it arrived
    (in order): a round trip of twice `delay` on every request, the bandwidth left as it was."""

    def __init__(self, port: int, delay: float) -> None:
        self.target, self.delay = port, delay
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.port = 0

        async def serve() -> None:
            listener = await asyncio.start_server(self._client, "127.0.0.1", 0)
            self.port = listener.sockets[0].getsockname()[1]
            started.set()
            await listener.serve_forever()

        threading.Thread(target=self.loop.run_until_complete, args=(serve(),), daemon=True).start()
        started.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target)
        await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if not data:
                    writer.close()
                    return
                writer.write(data)
                await writer.drain()

        sending = asyncio.ensure_future(deliver())
        try:
            while data := await reader.read(65536):
                queue.put_nowait((time.monotonic() + self.delay, data))
        except ConnectionError:
            pass
        queue.put_nowait((time.monotonic() + self.delay, b""))
        await sending


def write_history(layout: StateLayout, keys: int, batches: int, batch_keys: int, seed: int) -> Head:
    """A snapshot of `keys` keys at seq 0, then `batches` batches of `batch_keys` Zipf-drawn keys."""
    names = [f"k{i:08d}" for i in range(keys)]
    manifests.create(layout, 0, Manifest(seq=0, epoch=1, kind=Kind.BATCH, start=0, end=keys))
    head = Head(seq=0, offset=keys, epoch=1)
    snapshots.write_table(layout, 0, head, rows_table(dict.fromkeys(names, 1), "long"), "long")
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) ** 1.1 for rank in range(keys)]
    for batch in range(batches):
        drawn = rng.choices(names, weights, k=batch_keys)
        segment = changelog.write_segment(
            layout, 0, head.next_seq, 1, rows_table(dict.fromkeys(drawn, batch + 2), "long")
        )
        found = Manifest(
            seq=head.next_seq, epoch=1, kind=Kind.BATCH, start=head.offset, end=head.offset + batch_keys,
            segments=(segment,),
        )  # fmt: skip
        manifests.create(layout, 0, found)
        head = manifests.advance(head, found).head
        if batch % 600 == 599:
            print(f"  history: {batch + 1:,} of {batches:,} batches written", file=sys.stderr)
    return head


def timed_replay(layout: StateLayout, window: int) -> tuple[float, int]:
    """Seconds from a copy holding the first snapshot to the head, reading `window` manifests ahead."""
    prefetch.MOST_AHEAD = window
    copy = Replica(layout, 0)
    copy.load_snapshot()
    began = time.monotonic()
    applied = copy.catch_up()
    return time.monotonic() - began, applied


def timed_restore(layout: StateLayout) -> tuple[float, int]:
    """Seconds to load the newest snapshot (at the head) and find nothing after it."""
    began = time.monotonic()
    copy = Replica(layout, 0)
    rows = copy.load_snapshot()
    copy.catch_up()
    return time.monotonic() - began, rows


def measure(args: argparse.Namespace) -> dict[str, Any]:
    state_dir = Path(tempfile.mkdtemp(prefix="streamapp-replay-"))
    started = server.start(state_dir)
    load = [os.getloadavg()[0]]
    try:
        os.environ.update(started.env())
        bucket = f"replay-{uuid.uuid4().hex[:12]}"
        s3store.client_from_env().create_bucket(Bucket=bucket)
        direct = StateLayout(s3store.S3Store.from_uri(f"s3://{bucket}/app"))
        batches = args.minutes * 60
        head = write_history(direct, args.keys, batches, args.batch_keys, args.seed)
        sizes = direct.store.sizes(direct.changelog(0))
        proxy = LatencyProxy(started.port, args.rtt_ms / 2000.0)
        os.environ["AWS_ENDPOINT_URL_S3"] = f"http://127.0.0.1:{proxy.port}"
        far = StateLayout(s3store.S3Store.from_uri(f"s3://{bucket}/app"))
        runs: dict[str, list[float]] = {case: [] for case in CASES}
        for run in range(args.runs):
            for case, window in (("one at a time", 1), ("read ahead", prefetch.MOST_AHEAD)):
                seconds, applied = timed_replay(far, window)
                assert applied == batches, (case, applied)
                runs[case].append(seconds)
                print(f"  run {run + 1}: {case}: {seconds:.1f} s", file=sys.stderr)
            load.append(os.getloadavg()[0])
        snapshot = snapshots.write(direct, 0, head, "long")
        for run in range(args.runs):
            seconds, rows = timed_restore(far)
            runs["full restore"].append(seconds)
            print(f"  run {run + 1}: full restore: {seconds:.1f} s ({rows:,} rows)", file=sys.stderr)
        load.append(os.getloadavg()[0])
        return {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(),
            "load": [round(x, 1) for x in load],
            "minutes": args.minutes,
            "batches": batches,
            "keys": args.keys,
            "batch_keys": args.batch_keys,
            "rtt_ms": args.rtt_ms,
            "most_ahead": prefetch.MOST_AHEAD,
            "delta_bytes": sum(sizes.values()),
            "snapshot_bytes": snapshot.size,
            "runs": runs,
        }
    finally:
        server.stop(state_dir)


def report(raw: dict[str, Any]) -> list[str]:
    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} [{min(values):.1f}–{max(values):.1f}]"

    base = statistics.median(raw["runs"]["one at a time"])
    rows = [
        f"| {case} | {cell(raw['runs'][case])} | {base / statistics.median(raw['runs'][case]):.1f}x |"
        for case in CASES
    ]
    return [
        "# Replaying a long delta from S3",
        "",
        f"Made by `bench/replay.py` on {raw['date']}: {raw['machine']}; load average by stage "
        f"{', '.join(str(x) for x in raw['load'])} (start, after each run, end).",
        "",
        f"{raw['minutes']} minutes of a busy task ({raw['batches']:,} batches, a batch a second, each "
        f"rewriting {raw['batch_keys']:,} Zipf-drawn keys of {raw['keys']:,}) on the real test S3 server, "
        f"read through a proxy adding a {raw['rtt_ms']} ms round trip to every request. Changelog after "
        f"the first snapshot: {raw['delta_bytes'] / 2**20:.1f} MiB; the snapshot at the head: "
        f"{raw['snapshot_bytes'] / 2**20:.1f} MiB. Seconds from a copy holding the first snapshot to the "
        f"head, median [min–max] of {len(raw['runs']['one at a time'])} runs; the full restore loads the "
        "snapshot written at the head after the replays.",
        "",
        "| case | seconds | speed-up over one at a time |",
        "|---|---:|---:|",
        *rows,
        "",
        f"`read ahead` keeps up to {raw['most_ahead']} manifests and their segments in flight "
        "(`executor/state/prefetch.py`). A returning member picks the full restore when the changelog "
        "after its checkpoint holds more bytes than the newest snapshot and what follows it "
        f"(`delta-larger`): here {raw['delta_bytes'] / 2**20:.1f} MiB against "
        f"{raw['snapshot_bytes'] / 2**20:.1f} MiB.",
        "",
        "Regenerate: `.venv/bin/python bench/replay.py --write bench/results/replay.md` (raw data in "
        "`bench/results/replay.json`; `--from-raw` rewrites the report from it).",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=60, help="minutes of history, a batch a second")
    parser.add_argument("--keys", type=int, default=100_000, help="keys in the task's state")
    parser.add_argument("--batch-keys", type=int, default=300, help="keys each batch rewrites")
    parser.add_argument("--rtt-ms", type=float, default=20.0, help="round trip added to every request")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--write", type=Path, help="write the report here (and the raw data beside it)")
    parser.add_argument(
        "--from-raw", type=Path, help="write the report from this raw data, measuring nothing"
    )
    args = parser.parse_args(argv)
    if args.from_raw:
        raw = json.loads(args.from_raw.read_text())
    else:
        raw = measure(args)
        if args.write:
            args.write.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    text = "\n".join(report(raw)) + "\n"
    print(text)
    if args.write:
        args.write.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
