"""Snapshots of a partition's state: incremental, streamed, checksummed, versioned.

A snapshot is the state after commit `seq`, so that a restore reads it and only the segments after it.
Format 2 (this module writes it) is a small JSON document listing sorted runs (`runs`), oldest first:

```
snapshots/p=<P>/<seq>.json   {"format": 2, "seq", "offset", "epoch", "runs": [{name, rows, bytes, sha256}]}
runs/p=<P>/<seq>-<id>.arrows one sorted run (Arrow IPC stream), shared by every snapshot that lists it
```

Each snapshot is the previous one's runs plus runs of the rows changed since, read back from the
changelog segments the accepted manifests in between name (`write`), so the upload is what changed, not
the state, and nothing of it comes from the member's store: the batch lane is not involved, and memory
holds at most `DELTA_ROWS` changed rows at a time. Runs are merged by size tiers (`tiers`), streaming. A restore applies
the runs in order, a batch at a time, checking each run's checksum (`tables`).

Format 1 (`<seq>.parquet`, the whole state in one Parquet file with the head in its metadata) is what
earlier versions wrote. It still restores, and the first format-2 snapshot after an upgrade converts it
into a sorted run once (`_base`): that conversion holds the old snapshot in memory, as writing it did.

A snapshot is trusted when manifest `seq` still exists with the snapshot's epoch and offset; one that
was pruned, or whose runs are gone or do not match their checksums, is skipped for an older one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import PurePosixPath

import pyarrow as pa

from streamapp.executor.state import changelog, runs, tiers
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head
from streamapp.executor.state.runs import Run
from streamapp.executor.state.stores import arrow_type

log = logging.getLogger(__name__)

FORMAT = 2
SUFFIX = ".json"
LEGACY_SUFFIX = ".parquet"
DELTA_ROWS = 1_000_000
"""Changed rows sorted into one run at a time when a snapshot is written (bounds its memory)."""
_LEGACY_HEAD_KEYS = (b"streamapp.seq", b"streamapp.offset", b"streamapp.epoch")


@dataclass(frozen=True)
class Snapshot:
    """A snapshot as read: its head and runs (format 2), or the whole table of a format-1 one."""

    head: Head
    runs: tuple[Run, ...] = ()
    legacy: pa.Table | None = None

    @property
    def rows(self) -> int:
        """Rows a restore from it applies."""
        return self.legacy.num_rows if self.legacy is not None else sum(run.rows for run in self.runs)

    @property
    def size(self) -> int:
        """Bytes a restore from it reads (its runs; a format-1 snapshot's are not recorded: 0)."""
        return sum(run.size for run in self.runs)

    def to_json(self) -> bytes:
        head = self.head
        body = {"format": FORMAT, "seq": head.seq, "offset": head.offset, "epoch": head.epoch}
        return json.dumps({**body, "runs": [run.to_json() for run in self.runs]}).encode()


def seq_of(name: str) -> int:
    """The sequence a snapshot's name carries."""
    return int(PurePosixPath(name).name.split(".", 1)[0])


def newest_first(layout: StateLayout, partition: int) -> list[str]:
    """Snapshot names of a partition (either format), newest first."""
    folder = layout.snapshots(partition)
    found = [
        f"{folder}/{name}"
        for name in layout.store.names(folder)
        if name.endswith(SUFFIX) or name.endswith(LEGACY_SUFFIX)
    ]
    return sorted(found, key=lambda name: (seq_of(name), name.endswith(SUFFIX)), reverse=True)


def newest_seq(layout: StateLayout, partition: int) -> int:
    """The sequence of the newest snapshot, -1 when there is none."""
    names = newest_first(layout, partition)
    return seq_of(names[0]) if names else -1


def read(layout: StateLayout, name: str) -> Snapshot:
    """A snapshot by name; FileNotFoundError when it is gone."""
    data = layout.store.get(name)
    if name.endswith(LEGACY_SUFFIX):
        table = changelog.parquet_table(data)
        meta = table.schema.metadata or {}
        seq, offset, epoch = (int(meta[key]) for key in _LEGACY_HEAD_KEYS)
        return Snapshot(Head(seq=seq, offset=offset, epoch=epoch), legacy=table)
    body = json.loads(data)
    if body.get("format") != FORMAT:
        raise ValueError(f"{name}: snapshot format {body.get('format')!r}; this version reads {FORMAT} and 1")
    head = Head(seq=int(body["seq"]), offset=int(body["offset"]), epoch=int(body["epoch"]))
    return Snapshot(head, tuple(Run.from_json(run) for run in body["runs"]))


def newest_trusted(layout: StateLayout, partition: int) -> Snapshot | None:
    """The newest format-2 snapshot whose manifest still stands (format-1 ones are read whole to know
    their head, so they are left out), or None."""
    for name in newest_first(layout, partition):
        if not name.endswith(SUFFIX):
            continue
        try:
            found = read(layout, name)
        except FileNotFoundError:
            continue
        if trusted(layout, partition, found):
            return found
    return None


def trusted(layout: StateLayout, partition: int, snapshot: Snapshot) -> bool:
    """Manifest `seq` still exists with the snapshot's epoch and offset."""
    committed = manifests.read(layout, partition, snapshot.head.seq)
    return committed is not None and (committed.epoch, committed.end) == (
        snapshot.head.epoch,
        snapshot.head.offset,
    )


def tables(layout: StateLayout, snapshot: Snapshot) -> Iterator[pa.Table]:
    """The snapshot's rows in the order a restore applies them, a batch at a time. Raises
    `runs.CorruptRun` or FileNotFoundError part way: the caller discards what it applied."""
    if snapshot.legacy is not None:
        yield snapshot.legacy
        return
    for run in snapshot.runs:
        for batch in runs.read(layout.store, run):
            yield pa.Table.from_batches([batch])


def write(layout: StateLayout, partition: int, head: Head, value_type: str) -> Snapshot:
    """Publish the state after commit `head.seq`: the newest usable snapshot's runs, runs of the rows
    the accepted manifests since changed, merged by size tiers as they come. Returns what was published."""
    began = time.monotonic()
    arrow = arrow_type(value_type)
    base = _base(layout, partition, head, arrow)
    name = partial(runs.unique_name, layout.runs(partition), head.seq)
    kept = list(base.runs)
    inherited = frozenset(run.name for run in kept)
    uploaded = 0
    for delta in _deltas(layout, partition, base.head, head):
        kept.append(runs.write(layout.store, name(), arrow, [delta]))
        uploaded += kept[-1].size
        while count := tiers.merge_count([run.rows for run in kept]):
            merged = runs.merge(layout.store, kept[-count:], name(), arrow, bottom=count == len(kept))
            kept = kept[:-count] + ([merged] if merged.rows else [])
            uploaded += merged.size
    snapshot = publish(layout, partition, Snapshot(head, tuple(kept)), inherited)
    log.info(
        "partition %d: snapshot at seq %d: %d runs, %d rows; uploaded %d bytes in %.1f s",
        partition,
        head.seq,
        len(kept),
        snapshot.rows,
        uploaded,
        time.monotonic() - began,
    )
    return snapshot


def write_table(
    layout: StateLayout, partition: int, head: Head, table: pa.Table, value_type: str
) -> Snapshot:
    """Publish `table` as the whole state after commit `head.seq` (one sorted run): a format-1
    snapshot's conversion, and tools that build a history."""
    folder = layout.runs(partition)
    rows = runs.newest_per_key([table], drop_tombstones=True)
    run = runs.write(layout.store, runs.unique_name(folder, head.seq), arrow_type(value_type), [rows])
    return publish(layout, partition, Snapshot(head, (run,)), frozenset())


def publish(layout: StateLayout, partition: int, snapshot: Snapshot, inherited: frozenset[str]) -> Snapshot:
    """Create the snapshot's descriptor unless one at its sequence is there already and usable; then
    that one stands and this one's own runs (all but `inherited`) are removed. A revoked
    owner whose snapshot finishes late thus cannot replace the new owner's, whose runs and pruning
    rely on it; only a descriptor that cannot be restored from is replaced. Returns the one published."""
    name = layout.snapshot(partition, snapshot.head.seq)
    if layout.store.create(name, snapshot.to_json()):
        return snapshot
    try:
        there = read(layout, name)
    except (FileNotFoundError, ValueError):
        there = None
    if there is not None and trusted(layout, partition, there) and _runs_exist(layout, there):
        for run in snapshot.runs:
            if run.name not in inherited and all(run.name != kept.name for kept in there.runs):
                layout.store.delete(run.name)
        return there
    layout.store.put(name, snapshot.to_json())
    return snapshot


def _runs_exist(layout: StateLayout, snapshot: Snapshot) -> bool:
    return snapshot.legacy is not None or all(layout.store.exists(run.name) for run in snapshot.runs)


def _base(layout: StateLayout, partition: int, head: Head, arrow: pa.DataType) -> Snapshot:
    """The newest trusted snapshot at or before `head` whose runs all exist (a format-1 one converted
    into a run), or the empty state before seq 0 when there is none."""
    for name in newest_first(layout, partition):
        if seq_of(name) > head.seq:
            continue
        try:
            found = read(layout, name)
        except FileNotFoundError:
            continue
        if not trusted(layout, partition, found):
            continue
        if found.legacy is not None:
            rows = runs.newest_per_key([found.legacy], drop_tombstones=True)
            run = runs.write(
                layout.store, runs.unique_name(layout.runs(partition), found.head.seq), arrow, [rows]
            )
            log.info("partition %d: format-1 snapshot %s converted into run %s", partition, name, run.name)
            return Snapshot(found.head, (run,))
        if _runs_exist(layout, found):
            return found
    return Snapshot(Head())


def _deltas(layout: StateLayout, partition: int, base: Head, head: Head) -> Iterator[pa.Table]:
    """The rows the accepted manifests after `base` up to `head` changed, as sorted tables of the
    newest row per key, each of about `DELTA_ROWS` rows or fewer: memory holds one group of segments,
    however much changed. Raises when the history does not lead to `head`."""
    group: list[pa.Table] = []
    at = base
    while at.seq < head.seq:
        found = manifests.read(layout, partition, at.next_seq)
        if found is None:
            raise RuntimeError(f"partition {partition}: manifest {at.next_seq} is missing below {head.seq}")
        step = manifests.advance(at, found)
        if step.accepted:
            group.extend(changelog.read_table(layout, name) for name in found.segments)
        at = step.head
        if sum(table.num_rows for table in group) >= DELTA_ROWS:
            yield runs.newest_per_key(group, drop_tombstones=False)
            group = []
    if at != head:
        raise RuntimeError(f"partition {partition}: the history reached {at}, not the snapshot's {head}")
    if any(table.num_rows for table in group):
        yield runs.newest_per_key(group, drop_tombstones=False)


def prune(layout: StateLayout, partition: int, keep: int, held: frozenset[int] = frozenset()) -> int:
    """Delete all but the `keep` newest snapshots and those a reader holds (`held`: their sequences,
    `holds`), and the runs none of the kept ones lists; returns the sequence of the oldest kept one
    (what a restore needs segments after), -1 when there is none.

    A run nobody lists whose sequence is above the newest kept snapshot may belong to a snapshot being
    written (a previous owner's, still running): it stays until a newer snapshot is kept.
    """
    names = newest_first(layout, partition)
    if not names:
        return -1
    kept = [name for index, name in enumerate(names) if index < keep or seq_of(name) in held]
    listed: set[str] = set()
    for name in kept:
        if not name.endswith(SUFFIX):
            continue
        try:
            listed.update(run.name for run in read(layout, name).runs)
        except FileNotFoundError:
            continue
    for name in set(names) - set(kept):
        layout.store.delete(name)
    folder = layout.runs(partition)
    newest = seq_of(names[0])
    for entry in layout.store.names(folder):
        name = f"{folder}/{entry}"
        if entry.endswith(runs.SUFFIX) and name not in listed and changelog.file_seq(entry) <= newest:
            layout.store.delete(name)
    return seq_of(kept[-1]) if kept else -1
