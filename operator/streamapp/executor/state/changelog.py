"""Changelog segments of a partition's state on the state path, and their compaction.

A segment holds the rows one batch changed, as their new values (not deltas), so applying a segment is
an idempotent upsert and a copy can apply segments in order starting from any snapshot older than them.
Segment files are written before their manifest and are only read through a manifest that names them;
a segment's name carries the sha256 of its bytes, checked on every read (`read_file`), as a snapshot's
runs carry theirs.

Restore = newest snapshot (`snapshots`) + the segments committed after it, which keeps restore time
bounded by the snapshot interval rather than by the age of the partition, and `compact` deletes the
segments older snapshots cover, which keeps the changelog's size bounded too — except those after a
member's local checkpoint still within its retention (`retention`), so that member replays only the
delta when it gets the task back.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from pathlib import PurePosixPath

import pyarrow as pa
import pyarrow.parquet as pq

from streamapp.executor.state import blobstore
from streamapp.executor.state import retention as retention_rules
from streamapp.executor.state.blobstore import BlobStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.retention import Mark, Retention
from streamapp.executor.state.stores import parquet_bytes

DIGEST = "-sha256-"
SUFFIX = ".parquet"


class CorruptFile(ValueError):
    """A committed file whose bytes are not the ones it was written with: the store lost or changed
    them. Raised rather than applying them, since a segment or an output is not written twice."""


def unique_name(seq: int, epoch: int, data: bytes) -> str:
    """A file name no other attempt will use, so a retried batch never overwrites a committed file; it
    carries the sha256 of `data`, so whoever reads it through a manifest can check it (`read_file`)."""
    digest = hashlib.sha256(data).hexdigest()
    return f"{attempt_prefix(seq)}e{epoch}-{uuid.uuid4().hex[:12]}{DIGEST}{digest}{SUFFIX}"


def verified(name: str, data: bytes) -> bytes:
    """`data` when it hashes to the digest in `name`; a name written before names carried one is taken
    as it is."""
    stem = PurePosixPath(name).name.removesuffix(SUFFIX)
    if DIGEST not in stem:
        return data
    recorded = stem.rsplit(DIGEST, 1)[1]
    found = hashlib.sha256(data).hexdigest()
    if found != recorded:
        raise CorruptFile(f"{name}: {len(data)} bytes with sha256 {found}, not the ones it was written with")
    return data


def read_file(store: BlobStore, name: str) -> pa.Table:
    """A segment or an output file, checked against its name's digest; FileNotFoundError when it is
    gone (compacted), `CorruptFile` when its bytes changed."""
    return parquet_table(verified(name, store.get(name)))


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
    data = parquet_bytes(table)
    name = f"{layout.changelog(partition)}/{unique_name(seq, epoch, data)}"
    layout.store.put(name, data)
    return name


def base(name: str) -> str:
    """The last component of a store name."""
    return PurePosixPath(name).name


def read_table(layout: StateLayout, name: str) -> pa.Table:
    """A segment; FileNotFoundError when it is gone (compacted), `CorruptFile` when its bytes changed."""
    return read_file(layout.store, name)


def parquet_table(data: bytes) -> pa.Table:
    """The table a Parquet state file's bytes hold."""
    return pq.read_table(pa.BufferReader(data))


def file_seq(name: str | PurePosixPath) -> int:
    """The sequence number a segment or snapshot file name starts with."""
    return int(PurePosixPath(name).name.split("-", 1)[0].removesuffix(".parquet"))


def compact(layout: StateLayout, partition: int, covered: int, retention: Retention, now: float) -> int:
    """Delete the segments no restore needs any more; returns how many were deleted.

    A restore from a snapshot needs the segments after the oldest kept snapshot (`covered`, -1 when
    there is none: then every segment is needed); a member returning to
    its local checkpoint needs those after its checkpoint, for as long as `retention` keeps its mark
    (`retention.decide`). Manifests stay (they are small and carry the epochs and output names); a copy
    that still needed a deleted segment finds a snapshot covering it instead (`Replica.apply`), and a
    member whose mark was dropped restores in full. Segments left by crashed batches go by the same rule.
    """
    if covered < 0:
        return 0
    folder = layout.changelog(partition)
    sizes = layout.store.sizes(folder)
    by_seq: dict[int, int] = {}
    for name, size in sizes.items():
        if name.endswith(".parquet"):
            seq = file_seq(name)
            by_seq[seq] = by_seq.get(seq, 0) + size
    decision = retention_rules.decide(read_marks(layout, partition), by_seq, covered, retention, now)
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
