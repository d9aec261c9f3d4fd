"""Changelog segments and snapshots of a partition's state on the state path.

A segment holds the rows one batch changed, as their new values (not deltas), so applying a segment is
an idempotent upsert and a copy can apply segments in order starting from any snapshot older than them.
Segment files are written before their manifest and are only read through a manifest that names them.

A snapshot holds the whole state after commit `seq` and carries the history head (`seq`, input offset,
epoch) in its Parquet metadata. It is published whole (`BlobStore.put`), so a snapshot file is always
complete; it is derived only from accepted manifests, so it is trusted after checking that manifest
`seq` still carries the same epoch. Restore = newest snapshot + the segments committed after it, which
keeps restore time bounded by the snapshot interval rather than by the age of the partition, and
`compact` deletes the segments older snapshots cover, which keeps the changelog's size bounded too —
except those after a member's local checkpoint still within its retention (`retention`), so that member
replays only the delta when it gets the task back.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Mapping
from pathlib import PurePosixPath

import pyarrow as pa
import pyarrow.parquet as pq

from streamapp.executor.state import blobstore
from streamapp.executor.state import retention as retention_rules
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head
from streamapp.executor.state.retention import Mark, Retention

_HEAD_KEYS = (b"streamapp.seq", b"streamapp.offset", b"streamapp.epoch")


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="lz4")
    return sink.getvalue()


def unique_name(seq: int, epoch: int) -> str:
    """A file name no other attempt will use, so a retried batch never overwrites a committed file."""
    return f"{attempt_prefix(seq)}e{epoch}-{uuid.uuid4().hex[:12]}.parquet"


def attempt_prefix(seq: int) -> str:
    """What every attempt's file name for sequence `seq` starts with."""
    return f"{seq:012d}-"


def settle(layout: StateLayout, partition: int, decided: Mapping[int, tuple[str, ...]]) -> None:
    """These sequences are decided (seq → the segments its manifest names): remove the segments of
    their other attempts."""
    keep = {attempt_prefix(seq): {base(name) for name in names} for seq, names in decided.items()}
    blobstore.remove_unnamed(layout.store, layout.changelog(partition), keep)


def write_segment(layout: StateLayout, partition: int, seq: int, epoch: int, table: pa.Table) -> str:
    """Write one batch's changed rows; returns the name a manifest records."""
    name = f"{layout.changelog(partition)}/{unique_name(seq, epoch)}"
    layout.store.put(name, _parquet_bytes(table))
    return name


def base(name: str) -> str:
    """The last component of a store name."""
    return PurePosixPath(name).name


def read_table(layout: StateLayout, name: str) -> pa.Table:
    """A segment or snapshot; FileNotFoundError when it is gone (compacted or pruned)."""
    return pq.read_table(pa.BufferReader(layout.store.get(name)))


def write_snapshot(layout: StateLayout, partition: int, head: Head, table: pa.Table) -> str:
    """Publish the full state after commit `head.seq` (complete-or-absent)."""
    meta = dict(
        zip(
            _HEAD_KEYS,
            (str(head.seq).encode(), str(head.offset).encode(), str(head.epoch).encode()),
            strict=True,
        )
    )
    name = layout.snapshot(partition, head.seq)
    layout.store.put(name, _parquet_bytes(table.replace_schema_metadata(meta)))
    return name


def snapshot_head(table: pa.Table) -> Head:
    """The history head a snapshot (as read by `read_table`) was taken at."""
    meta = table.schema.metadata or {}
    seq, offset, epoch = (int(meta[key]) for key in _HEAD_KEYS)
    return Head(seq=seq, offset=offset, epoch=epoch)


def snapshots_newest_first(layout: StateLayout, partition: int) -> list[str]:
    """Snapshot names of a partition, newest first (names are zero-padded sequence numbers)."""
    return sorted(_parquet_names(layout, layout.snapshots(partition)), reverse=True)


def _parquet_names(layout: StateLayout, folder: str) -> list[str]:
    return [f"{folder}/{name}" for name in layout.store.names(folder) if name.endswith(".parquet")]


def newest_snapshot_seq(layout: StateLayout, partition: int) -> int:
    """The sequence of the newest snapshot, -1 when there is none."""
    newest = snapshots_newest_first(layout, partition)
    return file_seq(newest[0]) if newest else -1


def prune_snapshots(layout: StateLayout, partition: int, keep: int) -> None:
    """Delete all but the `keep` newest snapshots."""
    for name in snapshots_newest_first(layout, partition)[keep:]:
        layout.store.delete(name)


def file_seq(name: str | PurePosixPath) -> int:
    """The sequence number a segment or snapshot file name starts with."""
    return int(PurePosixPath(name).name.split("-", 1)[0].removesuffix(".parquet"))


def compact(layout: StateLayout, partition: int, retention: Retention, now: float) -> int:
    """Delete the segments no restore needs any more; returns how many were deleted.

    A restore from a snapshot needs the segments after the oldest kept snapshot; a member returning to
    its local checkpoint needs those after its checkpoint, for as long as `retention` keeps its mark
    (`retention.decide`). Manifests stay (they are small and carry the epochs and output names); a copy
    that still needed a deleted segment finds a snapshot covering it instead (`Replica.apply`), and a
    member whose mark was dropped restores in full. Segments left by crashed batches go by the same rule.
    """
    kept = snapshots_newest_first(layout, partition)
    if not kept:
        return 0
    folder = layout.changelog(partition)
    sizes = layout.store.sizes(folder)
    by_seq: dict[int, int] = {}
    for name, size in sizes.items():
        if name.endswith(".parquet"):
            seq = file_seq(name)
            by_seq[seq] = by_seq.get(seq, 0) + size
    decision = retention_rules.decide(
        read_marks(layout, partition), by_seq, file_seq(kept[-1]), retention, now
    )
    for mark in decision.dropped:
        layout.store.delete(layout.mark(partition, mark.member))
    removed = 0
    for name in sizes:
        if name.endswith(".parquet") and file_seq(name) <= decision.delete_through:
            layout.store.delete(f"{folder}/{name}")
            removed += 1
    return removed


def write_mark(layout: StateLayout, partition: int, mark: Mark) -> None:
    """Tell compaction which sequence `mark.member`'s local checkpoint holds (see `retention`)."""
    body = {"member": mark.member, "seq": mark.seq, "at": mark.at}
    layout.store.put(layout.mark(partition, mark.member), json.dumps(body).encode())


def delete_mark(layout: StateLayout, partition: int, member: str) -> None:
    """The member dropped its local state of the partition: its delta need not be kept."""
    layout.store.delete(layout.mark(partition, member))


def read_marks(layout: StateLayout, partition: int) -> list[Mark]:
    """Every member's mark for the partition; an unreadable one counts as absent (and is rewritten at
    that member's next checkpoint)."""
    found = []
    for name in layout.store.names(layout.marks(partition)):
        if not name.endswith(".json"):
            continue
        try:
            body = json.loads(layout.store.get(f"{layout.marks(partition)}/{name}"))
            found.append(Mark(member=str(body["member"]), seq=int(body["seq"]), at=float(body["at"])))
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            continue
    return found
