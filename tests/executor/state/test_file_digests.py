"""Changelog segments and output files name the sha256 of their bytes; a reader through a manifest
refuses one the store changed (it is never written twice, so applying it would be silent damage)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataplane_checks import commit

from streamapp.executor.io.sink import FileSink, committed_outputs
from streamapp.executor.state import changelog
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.changelog import CorruptFile
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head, Kind, Manifest
from streamapp.executor.state.replica import rebuild
from streamapp.executor.state.stores import parquet_bytes


def damage(path: Path) -> None:
    """One byte changed in the middle of the file: what a bad disk or a torn copy leaves."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_segment_whose_bytes_changed_is_refused_by_a_restore(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    head = commit(layout, Head(), {"a": 1, "b": 2})
    head = commit(layout, head, {"a": 3})
    found = manifests.read(layout, 0, 1)
    assert found is not None
    assert dict(rebuild(layout, 0).state.items()) == {"a": 3, "b": 2}
    damage(tmp_path / found.segments[0])
    with pytest.raises(CorruptFile, match="not the ones it was written with"):
        rebuild(layout, 0)


def test_an_output_file_whose_bytes_changed_is_refused_by_its_consumers(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path / "state")
    sink = FileSink(tmp_path / "out")
    rows = pa.table({"key": ["a", "b"], "value": [1, 2]})
    outputs = sink.write(0, 0, 1, rows)
    manifests.create(layout, 0, Manifest(seq=0, epoch=1, kind=Kind.BATCH, start=0, end=2, outputs=outputs))
    assert [table.to_pylist() for _, table in committed_outputs(layout, tmp_path / "out", 0)] == [
        rows.to_pylist()
    ]
    damage(tmp_path / "out" / outputs[0])
    with pytest.raises(CorruptFile):
        list(committed_outputs(layout, tmp_path / "out", 0))


def test_a_file_named_before_names_carried_a_digest_reads_as_before(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    name = f"{layout.changelog(0)}/{changelog.attempt_prefix(0)}e1-0123456789ab.parquet"
    layout.store.put(name, parquet_bytes(pa.table({"key": ["a"], "value": [7]})))
    assert changelog.read_table(layout, name).to_pylist() == [{"key": "a", "value": 7}]


def test_the_digest_is_of_the_bytes_written() -> None:
    data = parquet_bytes(pa.table({"key": ["a"], "value": [1]}))
    name = changelog.unique_name(4, 2, data)
    assert name.startswith("000000000004-e2-")
    assert changelog.verified(name, data) == data
    assert pq.read_table(pa.BufferReader(data)).num_rows == 1
    with pytest.raises(CorruptFile):
        changelog.verified(name, data + b"\0")
