"""Where each kind of file lives on the state path.

```
<state>/commits/p=<P>/<seq>.json            commit manifests (the only source of truth)
<state>/changelog/p=<P>/<seq>-e<epoch>-<id>.parquet   changelog segments: the rows a batch changed
<state>/snapshots/p=<P>/<seq>.parquet       full state of the partition after commit <seq>
<sink>/p=<P>/<seq>-e<epoch>-<id>.parquet    outputs (the default file sink)
```
Manifests name segments relative to the state root and outputs relative to the sink root, so a state
directory can be mounted at a different path on every member.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def partition_dir(root: Path, kind: str, partition: int) -> Path:
    """The folder holding one partition's files of one kind."""
    return root / kind / f"p={partition}"


@dataclass(frozen=True)
class StateLayout:
    """Paths under one app's state root."""

    root: Path

    def commits(self, partition: int) -> Path:
        return partition_dir(self.root, "commits", partition)

    def manifest(self, partition: int, seq: int) -> Path:
        return self.commits(partition) / f"{seq:012d}.json"

    def changelog(self, partition: int) -> Path:
        return partition_dir(self.root, "changelog", partition)

    def snapshots(self, partition: int) -> Path:
        return partition_dir(self.root, "snapshots", partition)

    def snapshot(self, partition: int, seq: int) -> Path:
        return self.snapshots(partition) / f"{seq:012d}.parquet"

    def resolve(self, relative: str) -> Path:
        """The absolute path of a file a manifest names."""
        return self.root / relative

    def relative(self, path: Path) -> str:
        """How a manifest names a file under the state root."""
        return path.relative_to(self.root).as_posix()
