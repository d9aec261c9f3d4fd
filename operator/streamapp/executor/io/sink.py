"""Where a batch's updated rows go, and how to read back exactly the committed ones.

A sink writes a batch's output files *before* the batch's manifest exists and returns their names; the
manifest records them. Consumers read outputs through manifests (`committed_outputs`), so files left by a
batch that died before its manifest, or by a fenced zombie, are never seen: output is exactly-once per
partition without transactions on the sink side.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from streamapp.executor.state import blobstore
from streamapp.executor.state.blobstore import BlobStore, as_store
from streamapp.executor.state.changelog import attempt_prefix, base, read_file, unique_name
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Manifest


class Sink(Protocol):
    """Destination of a partition's updated rows."""

    def write(self, partition: int, seq: int, epoch: int, rows: pa.Table) -> tuple[str, ...]:
        """Write one batch's rows durably; return the names the manifest should record."""
        ...

    def settle(self, partition: int, decided: Mapping[int, tuple[str, ...]]) -> None:
        """These sequences are decided (seq → the outputs its manifest names): drop what their other
        attempts left."""
        ...


@dataclass(frozen=True, init=False)
class FileSink:
    """Parquet files under `<root>/p=<P>/`, one per batch, in a directory or an S3 prefix (any
    `BlobStore`); names are relative to `root`.

    Each file is complete and durable before the manifest that names it is created (`BlobStore.put`):
    a manifest that survives a power loss never names a torn file.
    """

    store: BlobStore

    def __init__(self, root: Path | BlobStore) -> None:
        object.__setattr__(self, "store", as_store(root))

    def write(self, partition: int, seq: int, epoch: int, rows: pa.Table) -> tuple[str, ...]:
        buffer = pa.BufferOutputStream()
        pq.write_table(rows, buffer)
        data = buffer.getvalue().to_pybytes()
        name = f"{self.directory(partition)}/{unique_name(seq, epoch, data)}"
        self.store.put(name, data)
        return (name,)

    def settle(self, partition: int, decided: Mapping[int, tuple[str, ...]]) -> None:
        keep = {attempt_prefix(seq): {base(name) for name in names} for seq, names in decided.items()}
        blobstore.remove_unnamed(self.store, self.directory(partition), keep)

    @staticmethod
    def directory(partition: int) -> str:
        """The folder of one partition's files, relative to the root."""
        return f"p={partition}"


def committed_outputs(
    layout: StateLayout, sink_root: Path | BlobStore, partition: int
) -> Iterator[tuple[Manifest, pa.Table]]:
    """Each committed batch with the output rows it produced, in commit order."""
    sink = as_store(sink_root)
    for found in accepted_manifests(layout, partition):
        for name in found.outputs:
            yield found, read_file(sink, name)
