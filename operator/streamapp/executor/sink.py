"""Where a batch's updated rows go, and how to read back exactly the committed ones.

A sink writes a batch's output files *before* the batch's manifest exists and returns their names; the
manifest records them. Consumers read outputs through manifests (`committed_outputs`), so files left by a
batch that died before its manifest, or by a fenced zombie, are never seen: output is exactly-once per
partition without transactions on the sink side.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from streamapp.executor import manifest as manifests
from streamapp.executor.changelog import unique_name
from streamapp.executor.layout import StateLayout
from streamapp.executor.manifest import Head, Manifest


class Sink(Protocol):
    """Destination of a partition's updated rows."""

    def write(self, partition: int, seq: int, epoch: int, rows: pa.Table) -> tuple[str, ...]:
        """Write one batch's rows; return the names the manifest should record."""
        ...


@dataclass(frozen=True)
class FileSink:
    """Parquet files under `<root>/p=<P>/`, one per batch; names are relative to `root`."""

    root: Path

    def write(self, partition: int, seq: int, epoch: int, rows: pa.Table) -> tuple[str, ...]:
        directory = self.root / f"p={partition}"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / unique_name(seq, epoch)
        pq.write_table(rows, path)
        return (path.relative_to(self.root).as_posix(),)


def accepted_manifests(layout: StateLayout, partition: int) -> Iterator[Manifest]:
    """Every accepted manifest of a partition in commit order (refused zombie manifests skipped)."""
    head = Head()
    while (found := manifests.read(layout, partition, head.next_seq)) is not None:
        step = manifests.advance(head, found)
        head = step.head
        if step.accepted:
            yield found


def committed_outputs(
    layout: StateLayout, sink_root: Path, partition: int
) -> Iterator[tuple[Manifest, pa.Table]]:
    """Each committed batch with the output rows it produced, in commit order."""
    for found in accepted_manifests(layout, partition):
        for name in found.outputs:
            yield found, pq.read_table(sink_root / name)
