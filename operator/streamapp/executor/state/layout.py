"""Where each kind of file lives in the shared store.

```
<state>/commits/p=<P>/<seq>.json            commit manifests (the only source of truth)
<state>/changelog/p=<P>/<seq>-e<epoch>-<id>-sha256-<digest>.parquet   the rows a batch changed
<state>/snapshots/p=<P>/<seq>.json          state of the partition after commit <seq>: a list of runs
<state>/runs/p=<P>/<seq>-<id>.arrows        sorted runs the snapshots list (see `snapshots`)
<state>/history/p=<P>/floors/<seq>.json      how far manifests are pruned (the newest); archives of the
                                            manifests pruned beside them (archive-<seq>[-from-<seq>].json);
                                            floor.json: the newest floor's copy, read per commit
<state>/checkpoints/p=<P>/<member>.json     marks: which seq a member's local checkpoint holds, and when
<state>/holds/p=<P>/<member>.json           holds: which snapshot a member is restoring from (`holds`)
<state>/owner.json                          the app whose root this is (`owner`)
<sink>/p=<P>/<seq>-e<epoch>-<id>-sha256-<digest>.parquet    outputs (the default file sink)
```
Names are relative to the store's root (`blobstore.BlobStore`): manifests name segments relative to the
state root and outputs relative to the sink root, so a state directory can be mounted at a different
path on every member, or live in an S3 bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streamapp.executor.state.blobstore import BlobStore, as_store


def partition_dir(kind: str, partition: int) -> str:
    """The folder holding one partition's files of one kind."""
    return f"{kind}/p={partition}"


@dataclass(frozen=True, init=False)
class StateLayout:
    """Names under one app's state root, and the store they live in."""

    store: BlobStore

    def __init__(self, root: Path | BlobStore) -> None:
        object.__setattr__(self, "store", as_store(root))

    def commits(self, partition: int) -> str:
        return partition_dir("commits", partition)

    def manifest(self, partition: int, seq: int) -> str:
        return f"{self.commits(partition)}/{seq:012d}.json"

    def changelog(self, partition: int) -> str:
        return partition_dir("changelog", partition)

    def snapshots(self, partition: int) -> str:
        return partition_dir("snapshots", partition)

    def snapshot(self, partition: int, seq: int) -> str:
        return f"{self.snapshots(partition)}/{seq:012d}.json"

    def runs(self, partition: int) -> str:
        return partition_dir("runs", partition)

    def history(self, partition: int) -> str:
        return partition_dir("history", partition)

    def floor(self, partition: int) -> str:
        return f"{self.history(partition)}/floor.json"

    def floors(self, partition: int) -> str:
        return f"{self.history(partition)}/floors"

    def floor_mark(self, partition: int, seq: int) -> str:
        return f"{self.floors(partition)}/{seq:012d}.json"

    def archive(self, partition: int, through: int, first: int | None = None) -> str:
        """One prune's archive, or (`first`) the merge of several covering [first, through]."""
        merged = "" if first is None else f"-from-{first:012d}"
        return f"{self.history(partition)}/archive-{through:012d}{merged}.json"

    def marks(self, partition: int) -> str:
        return partition_dir("checkpoints", partition)

    def mark(self, partition: int, member: str) -> str:
        return f"{self.marks(partition)}/{member}.json"

    def holds(self, partition: int) -> str:
        return partition_dir("holds", partition)

    def hold(self, partition: int, member: str) -> str:
        return f"{self.holds(partition)}/{member}.json"
