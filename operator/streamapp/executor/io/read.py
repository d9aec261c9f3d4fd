"""`streamapp read output|state`: an app's committed results, without writing Python.

Both read through the commit manifests, like every reader must: files that no accepted manifest names
(a batch that died before its manifest, a fenced zombie's output) are never shown. Neither needs Spark
or the cluster, only the state store path (and the sink path for outputs), so they work from any pod
or machine that mounts the store.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from streamapp.executor.io.generate import partition_of
from streamapp.executor.io.sink import committed_outputs
from streamapp.executor.state import blobstore
from streamapp.executor.state.blobstore import BlobStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.replica import rebuild

FORMATS = ("table", "jsonl")
DEFAULT_SINK = "outputs"  # the executor's sink when the pipeline names none: <state>/outputs


class ReadError(Exception):
    """What the user asked for is not there; the message says what to check."""


@dataclass(frozen=True)
class OutputRow:
    """One row a committed batch wrote, with the commit that made it count."""

    partition: int
    seq: int
    epoch: int
    key: str
    value: Any


@dataclass(frozen=True)
class StateRow:
    """A key's committed value in one partition, as of commit `seq` (input consumed up to `offset`)."""

    partition: int
    key: str
    value: Any
    seq: int
    offset: int


def open_store(uri: str) -> StateLayout:
    """The state store at `uri` (`s3://bucket/prefix`, `file:///path` or a plain path); refuses
    anything that has no commits."""
    try:
        store = blobstore.open_uri(uri)
    except ValueError as bad:
        raise ReadError(f"--store {uri}: {bad}") from None
    if not store.names("commits"):
        raise ReadError(
            f"no state store at {store.describe()}: it has no commits/ "
            "(use the app's spec.pipeline.stateStore.uri, mounted here)"
        )
    return StateLayout(store)


def store_partitions(layout: StateLayout) -> list[int]:
    """Partitions with at least one commit folder, in order."""
    found = (name.removeprefix("p=") for name in layout.store.names("commits") if name.startswith("p="))
    return sorted(int(p) for p in found if p.isdigit())


def output_rows(
    layout: StateLayout, sink: Path | BlobStore, partitions: Iterable[int]
) -> Iterator[OutputRow]:
    """Every committed output row of the partitions, partition by partition in commit order."""
    for partition in partitions:
        try:
            for manifest, table in committed_outputs(layout, sink, partition):
                keys, values = table.column("key").to_pylist(), table.column("value").to_pylist()
                for key, value in zip(keys, values, strict=True):
                    yield OutputRow(partition, manifest.seq, manifest.epoch, key, value)
        except FileNotFoundError as missing:
            raise ReadError(
                f"partition {partition}: {missing.filename or missing} is named by a commit but missing; "
                f"is --output ({sink}) the app's sink path?"
            ) from None


def search_order(key: str, partitions: Sequence[int], count: int | None) -> list[int]:
    """Partitions to look in, the partitioner's choice first; pure.

    The file log puts a key in `partition_of(key, count)`; a transform that re-keys its output may
    keep state elsewhere, so every other partition follows. Without `count` the store's highest
    partition + 1 stands in for it.
    """
    if not partitions:
        return []
    guess = partition_of(key, count if count else max(partitions) + 1)
    return sorted(partitions, key=lambda p: (p != guess, p))


def state_row(layout: StateLayout, key: str, partitions: Iterable[int]) -> StateRow:
    """The key's committed value in the first of `partitions` that holds it."""
    searched = []
    for partition in partitions:
        replica = rebuild(layout, partition)
        searched.append(partition)
        value = replica.state.get(key)
        if value is not None:
            return StateRow(partition, key, value, replica.head.seq, replica.head.offset)
    where = f"partition {searched[0]}" if len(searched) == 1 else f"any of {len(searched)} partitions"
    raise ReadError(f"key {key!r} is not in the committed state of {where} in {layout.store.describe()}")


def write_rows(rows: Iterable[Any], fmt: str, out: TextIO) -> int:
    """Print dataclass rows as JSON lines (streamed) or an aligned table; returns how many were printed."""
    if fmt == "jsonl":
        count = 0
        for row in rows:
            out.write(json.dumps(asdict(row), default=str) + "\n")
            count += 1
        return count
    table = [asdict(r) for r in rows]
    if not table:
        return 0
    header = [name.upper() for name in table[0]]
    cells = [[str(v) for v in row.values()] for row in table]
    widths = [max(len(c) for c in column) for column in zip(header, *cells, strict=True)]
    for line in (header, *cells):
        out.write("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() + "\n")
    return len(table)


def _limited(rows: Iterator[OutputRow], limit: int | None) -> Iterator[OutputRow]:
    for count, row in enumerate(rows):
        if limit is not None and count >= limit:
            return
        yield row


def run_output(args: argparse.Namespace) -> int:
    layout = open_store(args.store)
    sink = blobstore.open_uri(args.output) if args.output else layout.store.child(DEFAULT_SINK)
    partitions = _chosen(layout, args.partition)
    printed = write_rows(_limited(output_rows(layout, sink, partitions), args.limit), args.format, sys.stdout)
    if printed == 0:
        print(f"no committed output in {len(partitions)} partition(s)", file=sys.stderr)
    return 0


def run_state(args: argparse.Namespace) -> int:
    layout = open_store(args.store)
    if args.partition is not None:
        partitions = _chosen(layout, args.partition)
    else:
        partitions = search_order(args.key, store_partitions(layout), args.partitions)
        if not partitions:
            raise ReadError(f"{layout.store.describe()} has no committed partition yet")
    write_rows([state_row(layout, args.key, partitions)], args.format, sys.stdout)
    return 0


def _chosen(layout: StateLayout, partition: int | None) -> list[int]:
    present = store_partitions(layout)
    if partition is None:
        return present
    if partition not in present:
        raise ReadError(
            f"partition {partition} has no commits in {layout.store.describe()} (it has {len(present)})"
        )
    return [partition]


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn a ReadError into a one-line message and exit status 1 (not a traceback)."""

    def guarded(args: argparse.Namespace) -> int:
        try:
            status = run(args)
        except ReadError as error:
            print(f"streamapp read: {error}", file=sys.stderr)
            return 1
        return status

    return guarded


def register(subparsers: Any) -> None:
    """Add `read output` and `read state`."""
    parser = subparsers.add_parser("read", help="read an app's committed output or state (no Spark needed)")
    verbs = parser.add_subparsers(dest="what", metavar="WHAT", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store", required=True, help="the app's pipeline.stateStore.uri (file:///... or a path)"
    )
    common.add_argument("--partition", type=int, help="only this partition")
    common.add_argument("--format", choices=FORMATS, default="table")

    output = verbs.add_parser("output", parents=[common], help="rows written by committed batches")
    output.add_argument("--output", help=f"the sink path (default <store>/{DEFAULT_SINK})")
    output.add_argument("--limit", type=int, help="print at most this many rows")
    output.set_defaults(run=_guarded(run_output))

    state = verbs.add_parser("state", parents=[common], help="a key's committed value")
    state.add_argument("--key", required=True)
    state.add_argument(
        "--partitions",
        type=int,
        help="the app's spec.partitions, so the key's partition is looked in first (default: from the store)",
    )
    state.set_defaults(run=_guarded(run_state))
