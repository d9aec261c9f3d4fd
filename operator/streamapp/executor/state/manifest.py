"""Commit manifests and the pure rules that turn a directory of them into one committed history.

A manifest `commits/p=<P>/<seq>.json` records one step of a partition's history: which input offsets
`[start, end)` it consumed, under which owner `epoch`, and which changelog segments and outputs it
produced. Manifests are created only if absent (`BlobStore.create`), so each `seq` has exactly
one manifest, and every file a manifest does not name is ignored by every reader: that is what makes a
partition's state and output exactly-once even when a writer dies between writing a segment and its
manifest.

Each manifest records the wall-clock time it was written (`committed_at`, epoch seconds): how long a
task stood still when it moved or restarted is the time between two of them (`task.Resumption`).

A *fence* manifest consumes no input; a new owner writes one with its (higher) epoch before processing.
Sequence numbers are consecutive and each writer only ever creates `head.seq + 1`, so once the fence
exists an older owner's next create collides with it (or with a later manifest), reads it, sees the
higher epoch and stops (`judge_conflict`). As a second line of defence `advance` refuses any manifest
whose epoch is lower than one already accepted, so even a manifest that somehow landed after the fence
counts for nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from streamapp.executor.state.expiry import WindowEnds
from streamapp.executor.state.layout import StateLayout


class Kind(StrEnum):
    BATCH = "batch"
    FENCE = "fence"


@dataclass(frozen=True)
class Manifest:
    """One committed step of a partition's history."""

    seq: int
    epoch: int
    kind: Kind
    start: int
    end: int
    segments: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    owner: str = ""
    committed_at: float | None = None
    windows: WindowEnds | None = None  # a windowed pipeline's bounds after this batch (`expiry`)

    def to_json(self) -> bytes:
        """The canonical JSON; `committed_at` and `windows` only when known, so a manifest written
        before they existed serializes (and digests, see `localstate.digest`) exactly as it was written."""
        body: dict[str, Any] = {
            "seq": self.seq,
            "epoch": self.epoch,
            "kind": self.kind.value,
            "input": {"start": self.start, "end": self.end},
            "segments": list(self.segments),
            "outputs": list(self.outputs),
            "owner": self.owner,
        }
        if self.committed_at is not None:
            body["committed_at"] = self.committed_at
        if self.windows is not None:
            body["windows"] = self.windows.to_json()
        return json.dumps(body, sort_keys=True).encode()

    @staticmethod
    def from_json(data: bytes) -> Manifest:
        body = json.loads(data)
        return Manifest(
            seq=int(body["seq"]),
            epoch=int(body["epoch"]),
            kind=Kind(body["kind"]),
            start=int(body["input"]["start"]),
            end=int(body["input"]["end"]),
            segments=tuple(body["segments"]),
            outputs=tuple(body["outputs"]),
            owner=str(body.get("owner", "")),
            committed_at=float(body["committed_at"]) if "committed_at" in body else None,
            windows=WindowEnds.from_json(body["windows"]) if "windows" in body else None,
        )


@dataclass(frozen=True)
class Head:
    """Position in a partition's history: the last manifest seen and what the accepted ones add up to.

    `seq` is the last sequence number examined (accepted or refused), `offset` the input offset up to
    which accepted batches consumed input, `epoch` the highest accepted epoch.
    """

    seq: int = -1
    offset: int = 0
    epoch: int = 0

    @property
    def next_seq(self) -> int:
        return self.seq + 1


@dataclass(frozen=True)
class Step:
    """Result of examining the next manifest: the new head, and whether its files count."""

    head: Head
    accepted: bool
    reason: str = field(default="")


def advance(head: Head, manifest: Manifest) -> Step:
    """Examine the manifest that follows `head`; pure.

    A manifest is accepted when its epoch is not lower than any accepted before and its input starts
    where the history stands. A refused manifest still moves `seq` on (its number is taken) but changes
    neither offset nor epoch, and its segments and outputs must be ignored.
    """
    if manifest.seq != head.next_seq:
        raise ValueError(f"manifest {manifest.seq} does not follow head {head.seq}")
    moved = Head(seq=manifest.seq, offset=head.offset, epoch=head.epoch)
    if manifest.epoch < head.epoch:
        return Step(moved, False, f"epoch {manifest.epoch} < fenced epoch {head.epoch}")
    if manifest.start != head.offset:
        return Step(moved, False, f"input starts at {manifest.start}, history is at {head.offset}")
    return Step(Head(seq=manifest.seq, offset=manifest.end, epoch=manifest.epoch), True)


class Fenced(Exception):
    """A higher epoch owns the partition; the caller must stop processing it."""

    def __init__(self, partition: int, mine: int, theirs: int) -> None:
        super().__init__(f"partition {partition}: epoch {mine} fenced by epoch {theirs}")
        self.partition = partition
        self.mine = mine
        self.theirs = theirs


class Conflict(Exception):
    """Someone else committed the sequence number this writer wanted; catch up and retry."""


def judge_conflict(partition: int, mine: int, winner: Manifest) -> Conflict | Fenced:
    """What losing the race for a sequence number means for a writer of epoch `mine`; pure."""
    if winner.epoch > mine:
        return Fenced(partition, mine, winner.epoch)
    return Conflict(f"partition {partition}: seq {winner.seq} taken by epoch {winner.epoch}")


def lag(owner_offset: int, applied: Head) -> int:
    """Input records a copy still has to apply to be as current as the owner's committed history."""
    return max(0, owner_offset - applied.offset)


def read(layout: StateLayout, partition: int, seq: int) -> Manifest | None:
    """The manifest at `seq`, or None when it does not exist (yet)."""
    try:
        return Manifest.from_json(layout.store.get(layout.manifest(partition, seq)))
    except FileNotFoundError:
        return None


def create(layout: StateLayout, partition: int, manifest: Manifest) -> None:
    """Publish `manifest` if its seq is free; raise Conflict or Fenced when another writer holds it.

    A name freed by pruning (`history`) is not free: a writer that wins one is a long-fenced owner, so
    its manifest is deleted again and it is told it is fenced."""
    name = layout.manifest(partition, manifest.seq)
    if layout.store.create(name, manifest.to_json()):
        pruned = floor_copy(layout, partition)
        if pruned.seq >= manifest.seq:
            layout.store.delete(name)
            raise Fenced(partition, manifest.epoch, pruned.epoch)
        return
    winner = read(layout, partition, manifest.seq)
    if winner is None:
        raise RuntimeError(f"manifest {manifest.seq} of partition {partition} exists but cannot be read")
    raise judge_conflict(partition, manifest.epoch, winner)


def floor(layout: StateLayout, partition: int) -> Head:
    """How far the history is pruned (`history.prune`): manifests at or below `seq` may be gone, and
    the history there stood at `offset` under `epoch`. `Head()` when nothing was pruned.

    The newest of the floor marks, each created once and never replaced, so a prune that a stale owner
    finishes late cannot move the floor back; `floor.json` counts too (versions before the marks wrote
    only that)."""
    marks = [name for name in layout.store.names(layout.floors(partition)) if name.endswith(".json")]
    newest = Head()
    for name in sorted(marks, reverse=True):
        try:
            newest = _head(layout.store.get(f"{layout.floors(partition)}/{name}"))
            break
        except FileNotFoundError:
            continue  # removed by a newer prune since the listing: an older one than the newest
    copy = floor_copy(layout, partition)
    return copy if copy.seq > newest.seq else newest


def floor_copy(layout: StateLayout, partition: int) -> Head:
    """`floor.json`: the newest floor mark's copy at one read, what `create` checks after every commit
    (a listing per commit would cost more than the commit on S3). A prune finished late by a stale
    owner may put an older copy back until the next prune; it is never ahead of the marks."""
    try:
        return _head(layout.store.get(layout.floor(partition)))
    except FileNotFoundError:
        return Head()


def _head(data: bytes) -> Head:
    body = json.loads(data)
    return Head(seq=int(body["seq"]), offset=int(body["offset"]), epoch=int(body["epoch"]))


def anchor(layout: StateLayout, partition: int, head: Manifest) -> Manifest | None:
    """The newest batch manifest at or before `head` (usually `head` itself; a fence consumes no
    input, so it says nothing of what a store holds)."""
    found: Manifest | None = head
    while found is not None and found.kind is not Kind.BATCH:
        found = read(layout, partition, found.seq - 1) if found.seq > 0 else None
    return found


def newest(layout: StateLayout, partition: int, after: int) -> Manifest | None:
    """The newest manifest after sequence `after`, or None when `after` is the newest.

    Its epoch is a lower bound of the highest epoch the store has seen for the partition, which the
    executor reports so the operator never hands out an epoch the store would fence.
    """
    latest = latest_seq(layout, partition, after)
    return read(layout, partition, latest) if latest > after else None


def latest_seq(layout: StateLayout, partition: int, after: int) -> int:
    """The highest existing sequence number at or after `after` (which exists, or is -1).

    Manifests are created in order, each only once its predecessor exists, so existence is monotone
    above `after`: probes gallop (`after`+1, +2, +4, ...) to the first missing one, then bisect. About
    2·log2(k) stats (or HEADs) for k new manifests, and one when there is none, where probing one by one
    cost k + 1: a copy far behind asked that of the store at every status report. No folder is listed
    (it only grows).
    """

    def exists(seq: int) -> bool:
        return layout.store.exists(layout.manifest(partition, seq))

    found, step = after, 1
    while exists(found + step):
        found += step
        step *= 2
    missing = found + step
    while missing - found > 1:
        middle = (found + missing) // 2
        if exists(middle):
            found = middle
        else:
            missing = middle
    return found
