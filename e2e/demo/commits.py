"""Following the commit manifests from outside the executors: when each batch was committed, by whom.

A manifest is published once, complete, by a link of a file written just before
(`storage.create_exclusive`), so on a directory store its file's mtime is the moment the batch was
committed, as the shared filesystem saw it. That is what the demo measures downtime from, not the
executors' own claims. On an object store (the cluster benchmark's large regime) it is the time the
writer recorded in the manifest (`committed_at`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from manifestfeed import published_after
from streamapp.executor.state.blobstore import FileStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head, Kind, Manifest


@dataclass(frozen=True)
class Commit:
    """One accepted batch of a partition: input offsets `[start, end)`, its owner, when (epoch seconds)."""

    partition: int
    seq: int
    start: int
    end: int
    owner: str
    at: float


@dataclass
class CommitLog:
    """Every accepted batch seen so far, read incrementally (each poll reads only new manifests)."""

    state: StateLayout
    partitions: int
    heads: dict[int, Head] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)

    def poll(self) -> None:
        """Read the manifests published since the last poll."""
        for partition in range(self.partitions):
            for found, step in published_after(self.state, partition, self.heads.get(partition, Head())):
                self.heads[partition] = step.head
                if step.accepted and found.kind is Kind.BATCH and found.end > found.start:
                    at = self._mtime(partition, found)
                    self.commits.append(Commit(partition, found.seq, found.start, found.end, found.owner, at))

    def committed(self, partition: int) -> int:
        """Input records of the partition committed so far."""
        return self.heads.get(partition, Head()).offset

    def last_commit(self, partition: int) -> float | None:
        """When the partition last committed a batch (epoch seconds), None before its first."""
        times = [c.at for c in self.commits if c.partition == partition]
        return max(times) if times else None

    def _mtime(self, partition: int, found: Manifest) -> float:
        """The manifest file's mtime; the time its writer recorded when the file is already pruned
        (the poll came after the owner archived it: see `streamapp.executor.state.history`) or lives
        in an object store (whose modification times are whole seconds, against batches about a
        second apart: the writer's time, taken just before the create, is the finer figure)."""
        store = self.state.store
        if not isinstance(store, FileStore):
            return found.committed_at or 0.0
        try:
            return os.stat(store.path(self.state.manifest(partition, found.seq))).st_mtime
        except FileNotFoundError:
            return found.committed_at or 0.0
