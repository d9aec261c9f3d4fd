"""Where a round of 32 partitions × 10,000 records goes: the largest side-by-side case of
`bench/results/dataplane.md`, run alone for a sampling profiler.

    .venv/bin/py-spy record --idle -f raw -o /tmp/rounds.txt -- .venv/bin/python bench/roundprofile.py
    .venv/bin/python bench/roundprofile.py --summarize /tmp/rounds.txt

The summary gives the batch lane's samples within the rounds by the data-plane line they wait in (most
of them in a call into Spark's driver).
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from dataplane import partitioned_log, run_rounds
from streamapp.executor.spark import session

PARTITIONS = 32
PER_BATCH = 10_000
ROUNDS = 8


def summarize(path: Path) -> None:
    """The batch lane's samples within a round (the main thread's stacks through `run_round`; raw
    py-spy output: `frame;frame;... count` per line), by the innermost data-plane frame each waits in."""
    total, by_frame = 0, Counter[str]()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if (
            not count.isdigit()
            or not frames[0].startswith("<module> (roundprofile.py")
            or "run_round" not in stack
        ):
            continue
        total += int(count)
        ours = [frame for frame in frames if "streamapp/executor/" in frame]
        by_frame[ours[-1] if ours else "(other)"] += int(count)
    for frame, samples in by_frame.most_common(12):
        print(f"{100 * samples / total:5.1f}%  {frame}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--summarize", type=Path)
    args = parser.parse_args()
    if args.summarize:
        summarize(args.summarize)
        return 0
    session()
    root = Path(tempfile.mkdtemp(prefix="streamapp-roundprofile-"))
    log = partitioned_log(root, PARTITIONS, PER_BATCH, ROUNDS, 2_000)
    run = run_rounds(root, log, PARTITIONS, PER_BATCH)
    print(f"{run.records:,} records in {run.seconds:.1f} s; rounds ms: {[round(ms) for ms in run.batch_ms]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
