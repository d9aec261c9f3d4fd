"""Task state kept on the member's own volume, so that a restarted member replays only the delta.

Static membership and delayed reassignment give a restarted member its tasks back; this module makes
that worth something. Each task keeps its store (`MemoryStore` or `LmdbStore`) under the member's local
state directory (`STATE_DIR`, the pod's `/var/lib/streamapp`: the member's claim when the app has one,
else an emptyDir that survives container restarts) next to a checkpoint of the position in the shared
changelog that the store reflects, as Kafka Streams' `.checkpoint` file does:

```
<local>/p=<P>/checkpoint.json   store kind, head (seq, offset, epoch), digests of two manifests
<local>/p=<P>/memory.parquet    the memory store's contents (or lmdb/ for LMDB)
```

A checkpoint is trusted only when the shared history still holds exactly the manifests it names: the
one at its head and the newest batch manifest at or before it (an *anchor*: batch manifests name
segments with random ids, so no other history — an app re-created on a wiped store, another app's
volume — can match it). A checkpoint that is missing, torn (its checksum fails), of another store kind
or of another history is deleted and the task restores in full; local state is never trusted blindly.
Because the checkpoint is written only after the store is persisted, and removed before a store is
cleared, a crash at any point leaves either a trustworthy pair or no checkpoint at all.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import typing
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from streamapp import faults
from streamapp.executor.state import storage
from streamapp.executor.state.lmdbstore import LmdbStore
from streamapp.executor.state.manifest import Head, Manifest
from streamapp.executor.state.stores import KeyedStore, MemoryStore

log = logging.getLogger(__name__)

# The local stores this module implements (the spec's `executor.localStore` offers the same names).
LocalStoreKind = typing.Literal["memory", "lmdb"]
STORE_KINDS: tuple[LocalStoreKind, ...] = typing.get_args(LocalStoreKind)
CHECKPOINT = "checkpoint.json"
FORMAT = 1


class LocalStateError(RuntimeError):
    """The local state directory cannot be used (another process holds it)."""


def digest(manifest: Manifest) -> str:
    """What a checkpoint records of a manifest: a hash of its canonical JSON."""
    return hashlib.sha256(manifest.to_json()).hexdigest()


@dataclass(frozen=True)
class Checkpoint:
    """The shared-history position one task's local store reflects."""

    store: LocalStoreKind
    partition: int
    head: Head
    head_digest: str
    anchor_seq: int
    anchor_digest: str

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT,
            "store": self.store,
            "partition": self.partition,
            "head": {"seq": self.head.seq, "offset": self.head.offset, "epoch": self.head.epoch},
            "headDigest": self.head_digest,
            "anchor": {"seq": self.anchor_seq, "digest": self.anchor_digest},
        }
        text = json.dumps(body, sort_keys=True)
        return json.dumps({"body": body, "sha256": hashlib.sha256(text.encode()).hexdigest()}).encode()

    @staticmethod
    def parse(data: bytes) -> Checkpoint:
        """A checkpoint from its file; ValueError when it is torn, corrupt or of another format."""
        try:
            outer = json.loads(data)
            body = outer["body"]
            if hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest() != outer["sha256"]:
                raise ValueError("checksum mismatch")
            if body["format"] != FORMAT or body["store"] not in STORE_KINDS:
                raise ValueError(f"format {body['format']} / store {body['store']!r} not understood")
            head = body["head"]
            return Checkpoint(
                store=body["store"],
                partition=int(body["partition"]),
                head=Head(seq=int(head["seq"]), offset=int(head["offset"]), epoch=int(head["epoch"])),
                head_digest=str(body["headDigest"]),
                anchor_seq=int(body["anchor"]["seq"]),
                anchor_digest=str(body["anchor"]["digest"]),
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as error:
            raise ValueError(f"unreadable checkpoint: {error!r}") from None


class LocalState:
    """The local state directory of one executor: per-partition stores and checkpoints.

    It holds an exclusive lock on the directory for the life of the process: two executors sharing
    one volume would overwrite each other's stores and checkpoints. Within the process, one task at a
    time holds a partition's store: a task that returns while the one that left is still finishing its
    unit of work waits for it to close, so the leaver's closing checkpoint can never land next to the
    newcomer's store (it waits without a copy worker: `Task.step` passes it over until then).
    """

    def __init__(
        self,
        root: Path,
        kind: LocalStoreKind = "memory",
        value_type: str = "long",
        checkpoint_every: int = 10,
    ) -> None:
        if kind not in STORE_KINDS:
            raise ValueError(f"unknown local store {kind!r}: use one of {', '.join(STORE_KINDS)}")
        self.root = root
        self.kind: LocalStoreKind = kind
        self.value_type = value_type
        self.checkpoint_every = checkpoint_every
        self._lock = _lock(root)
        self._held: set[int] = set()
        self._released = threading.Condition()
        self._kept: dict[int, tuple[int, int | None]] = {}

    def close(self) -> None:
        """Release the directory (the executor stops; its tasks have checkpointed)."""
        self._lock.close()

    def directory(self, partition: int) -> Path:
        return self.root / f"p={partition}"

    def open(self, partition: int) -> tuple[KeyedStore, Checkpoint | None, bool]:
        """The partition's store, its checkpoint, and whether a checkpoint was there but unusable; a
        fresh empty store when either is unusable. Held until `release`."""
        with self._released:
            self._released.wait_for(lambda: partition not in self._held)
            self._held.add(partition)
        directory = self.directory(partition)
        marker = directory / CHECKPOINT
        try:
            found = Checkpoint.parse(marker.read_bytes())
            if found.store != self.kind or found.partition != partition:
                raise ValueError(f"checkpoint of a {found.store} store of partition {found.partition}")
            return self._store(directory), found, False
        except Exception:  # none, torn, foreign, or a store that will not open: restore in full
            discarded = marker.exists()
            self.wipe(partition)
        return self._store(directory), None, discarded

    def held(self, partition: int) -> bool:
        """Whether a task of this executor holds the partition's store: `open` would wait for it."""
        with self._released:
            return partition in self._held

    def release(self, partition: int) -> None:
        """The task holding the partition's store has closed it."""
        with self._released:
            self._held.discard(partition)
            self._released.notify_all()

    def _store(self, directory: Path) -> KeyedStore:
        storage.ensure_dir(directory)
        if self.kind == "lmdb":
            return LmdbStore(directory, self.value_type)
        return MemoryStore.load(directory, self.value_type)

    def forget(self, partition: int) -> None:
        """Drop the checkpoint before the store is cleared: a crash mid-restore must not leave a
        checkpoint next to a half-restored store."""
        (self.directory(partition) / CHECKPOINT).unlink(missing_ok=True)
        storage.fsync_dir(self.directory(partition))

    def wipe(self, partition: int) -> None:
        """Delete everything of the partition (checkpoint first)."""
        directory = self.directory(partition)
        if directory.exists():
            self.forget(partition)
            shutil.rmtree(directory)

    def save(self, persist: Callable[[], None], checkpoint: Checkpoint) -> None:
        """Persist the store (`KeyedStore.persister`), then publish the checkpoint that names its
        position (in that order)."""
        persist()
        faults.reached("checkpoint.persisted")
        storage.write_atomic(self.directory(checkpoint.partition) / CHECKPOINT, checkpoint.to_json())

    def kept(self, running: Collection[int], limit: int) -> dict[int, int]:
        """Per partition not `running` here whose checkpoint is on the volume, the input offset its
        store is current to; the `limit` newest checkpoints. What the member reports of copies it gave
        up (`LocalCopy`), so that the operator counts a restore on this member as the delta since
        them, as Kafka Streams' assignor counts a client's task directories. A checkpoint of another
        store kind, or one that does not parse, is left out: opening it would restore in full. Parsed
        once per change of the file."""
        with self._released:
            held = set(self._held)
        found: list[tuple[int, int, int]] = []
        seen: dict[int, tuple[int, int | None]] = {}
        for marker in self.root.glob(f"p=*/{CHECKPOINT}"):
            partition = int(marker.parent.name.removeprefix("p="))
            if partition in running or partition in held:
                continue
            try:
                changed = marker.stat().st_mtime_ns
                cached = self._kept.get(partition)
                if cached is None or cached[0] != changed:
                    checkpoint = Checkpoint.parse(marker.read_bytes())
                    usable = checkpoint.store == self.kind and checkpoint.partition == partition
                    cached = (changed, checkpoint.head.offset if usable else None)
            except (OSError, ValueError):  # pruned or rewritten meanwhile, or torn: not a copy to count
                continue
            seen[partition] = cached
            if cached[1] is not None:
                found.append((cached[0], partition, cached[1]))
        self._kept = seen
        return {partition: offset for _, partition, offset in sorted(found, reverse=True)[:limit]}

    def prune(self, keep: set[int], idle_seconds: float) -> list[int]:
        """Delete the local state of partitions not in `keep` whose checkpoint is older than
        `idle_seconds`: a task that left this member long ago will restore elsewhere, and its store
        would only fill the volume. Returns the partitions deleted.

        A store still held is not touched: a task dropped in the middle of a long restore closes it
        when that unit ends, and writes its checkpoint then. Wiped under it, the checkpoint landed
        beside an empty store that a later copy trusted, and its owner committed counts from zero (a
        large cluster bench run: 133 of a batch's 204 keys wrong). The partition is held while it is
        wiped, so no task opens it half deleted."""
        deleted = []
        now = time.time()
        for entry in self.root.glob("p=*"):
            partition = int(entry.name.removeprefix("p="))
            if partition in keep:
                continue
            with self._released:
                if partition in self._held:
                    continue
                marker = entry / CHECKPOINT
                changed = marker.stat().st_mtime if marker.exists() else entry.stat().st_mtime
                if now - changed <= idle_seconds:
                    continue
                self._held.add(partition)
            try:
                self.wipe(partition)
            finally:
                self.release(partition)
            # Said, because a task that comes back later restores in full without a fullRestoreReason
            # (there was no checkpoint left to find unusable).
            log.info(
                "partition %d: local state deleted, its checkpoint %.0f s old (retention %.0f s)",
                partition,
                now - changed,
                idle_seconds,
            )
            deleted.append(partition)
        return deleted


def _lock(root: Path) -> IO[bytes]:
    root.mkdir(parents=True, exist_ok=True)
    handle = open(root / ".lock", "wb")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise LocalStateError(
            f"local state directory {root} is in use by another executor (pid file lock {root}/.lock)"
        ) from None
    os.set_inheritable(handle.fileno(), False)
    return handle
