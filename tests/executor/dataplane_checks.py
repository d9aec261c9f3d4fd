"""References computed directly from the input log, and checks of a partition's committed history."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.sink import FileSink, Sink, committed_outputs
from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import Executor
from streamapp.executor.state import changelog
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.blobstore import BlobStore, FileStore
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import LocalState
from streamapp.executor.state.manifest import Head, Kind, Manifest
from streamapp.executor.state.replica import rebuild
from streamapp.executor.state.stores import rows_table
from streamapp.executor.task import TaskConfig

COUNTS = "streamapp.executor.samples.counts:counts"


def generated_log(root: Path, **spec: Any) -> FileLog:
    """The file log at `root` with `GenerateSpec(**spec)`'s records appended."""
    log = FileLog(root)
    generate(log, GenerateSpec(**spec))
    return log


def reference_counts(log: FileLog, partition: int, end: int | None = None) -> Counter[str]:
    """Running count per key over offsets `[0, end)`, straight from the log."""
    return Counter(log.read_arrow(partition, 0, end).column("key").to_pylist())


@dataclass(frozen=True)
class Stores:
    """Where a test's executors keep state and write outputs: two directories, or two S3 prefixes."""

    state: BlobStore
    outputs: BlobStore

    @staticmethod
    def under(root: Path) -> Stores:
        return Stores(FileStore(root / "state"), FileStore(root / "outputs"))


def check_partition(state: StateLayout, sink_root: Path | BlobStore, log: FileLog, partition: int) -> int:
    """Assert the committed state and outputs of a count pipeline equal the reference; returns batches.

    Accepted batches must tile the input `[0, end)` with no gap and no overlap (nothing lost, nothing
    twice); each batch's output must hold exactly the keys of its input range with the running count
    as of its end offset; the rebuilt state must equal the count over the whole log.
    """
    keys = log.read_arrow(partition).column("key").to_pylist()
    position = 0
    for found in accepted_manifests(state, partition):
        assert found.start == position, f"gap or overlap at seq {found.seq}"
        if found.kind is Kind.FENCE:
            assert found.end == found.start
        position = found.end
    assert position == log.end_offset(partition), "input not fully committed"

    batches = 0
    running: Counter[str] = Counter()
    consumed = 0
    for found, table in committed_outputs(state, sink_root, partition):
        running.update(keys[consumed : found.end])
        expected = {key: running[key] for key in set(keys[found.start : found.end])}
        assert consumed == found.start
        consumed = found.end
        got = dict(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))
        assert got == expected, f"output of seq {found.seq} differs from the reference"
        batches += 1
    assert consumed == len(keys)

    replica = rebuild(state, partition)
    assert replica.head.offset == len(keys)
    assert replica.state.values == dict(Counter(keys))
    return batches


def files_in(directory: Path | BlobStore) -> int:
    """Published Parquet files of a sink (its `p=<P>/` folders)."""
    store = FileStore(directory) if isinstance(directory, Path) else directory
    return sum(1 for part in store.names("") for name in store.names(part) if name.endswith(".parquet"))


def executor_for(
    root: Path | Stores,
    log: FileLog,
    member: str,
    pipeline: str = COUNTS,
    local: LocalState | None = None,
    sink: Sink | None = None,
    **config: Any,
) -> Executor:
    """An executor on the shared state store `root/state` writing outputs to `root/outputs` (or to
    `sink`)."""
    stores = root if isinstance(root, Stores) else Stores.under(root)
    return Executor(
        StateLayout(stores.state),
        log,
        sink or FileSink(stores.outputs),
        pipelines.load(pipeline),
        TaskConfig(owner=member, **config),
        local=local,
    )


def commit(layout: StateLayout, head: Head, rows: dict[str, Any], epoch: int = 1) -> Head:
    """Append one batch that changed `rows` to partition 0's history."""
    seq = head.next_seq
    segment = changelog.write_segment(layout, 0, seq, epoch, rows_table(rows, "long"))
    found = Manifest(
        seq=seq, epoch=epoch, kind=Kind.BATCH, start=head.offset, end=head.offset + 1, segments=(segment,)
    )
    manifests.create(layout, 0, found)
    return manifests.advance(head, found).head
