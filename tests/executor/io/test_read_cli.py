"""`streamapp read`: committed output and state through the manifests, on a store built without Spark.

The store is written with the data plane's own commit steps (changelog segment, sink output, manifest
created only if absent), plus what a crash and a zombie leave behind, so the test shows that only what
accepted manifests name is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamapp.cli import main
from streamapp.executor.io.generate import partition_of
from streamapp.executor.io.read import search_order
from streamapp.executor.io.sink import FileSink
from streamapp.executor.state import changelog
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Kind, Manifest
from streamapp.executor.state.stores import rows_table

PARTITIONS = 4


def commit(
    root: Path, partition: int, seq: int, epoch: int, start: int, end: int, rows: dict[str, int]
) -> None:
    """One batch committed the way `Task._commit` does it: segment, outputs, then the manifest."""
    layout = StateLayout(root / "state")
    table = rows_table(rows, "long")
    segment = changelog.write_segment(layout, partition, seq, epoch, table)
    outputs = FileSink(root / "state" / "outputs").write(partition, seq, epoch, table)
    manifests.create(
        layout,
        partition,
        Manifest(
            seq=seq, epoch=epoch, kind=Kind.BATCH, start=start, end=end, segments=(segment,), outputs=outputs
        ),
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Counts keyed like the file log partitions them; partition 1 also has a zombie and a crash."""
    by_partition: dict[int, list[str]] = {}
    for key in (f"user-{i}" for i in range(12)):
        by_partition.setdefault(partition_of(key, PARTITIONS), []).append(key)
    for partition, keys in by_partition.items():
        commit(tmp_path, partition, 0, 1, 0, 10, {k: 1 for k in keys})
        commit(tmp_path, partition, 1, 1, 10, 20, {keys[0]: 2})
    layout = StateLayout(tmp_path / "state")
    # A zombie of epoch 0 lost the race: its manifest is refused, its output never counts.
    zombie = FileSink(tmp_path / "state" / "outputs").write(1, 2, 0, rows_table({"zombie": 99}, "long"))
    manifests.create(layout, 1, Manifest(seq=2, epoch=0, kind=Kind.BATCH, start=20, end=30, outputs=zombie))
    # A batch that died after writing its output, before its manifest.
    FileSink(tmp_path / "state" / "outputs").write(1, 3, 1, rows_table({"crashed": 77}, "long"))
    return tmp_path / "state"


def read(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["read", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_output_shows_exactly_the_committed_rows(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = read(capsys, "output", "--store", f"file://{store}", "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert status == 0
    assert len(rows) == 12 + PARTITIONS
    assert {r["key"] for r in rows} == {f"user-{i}" for i in range(12)}
    assert [(r["partition"], r["seq"]) for r in rows] == sorted((r["partition"], r["seq"]) for r in rows)
    assert all(r["epoch"] == 1 for r in rows)


def test_output_of_one_partition_as_a_table_with_a_limit(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = read(capsys, "output", "--store", str(store), "--partition", "1", "--limit", "2")
    lines = out.splitlines()
    assert status == 0
    assert lines[0].split() == ["PARTITION", "SEQ", "EPOCH", "KEY", "VALUE"]
    assert len(lines) == 3 and all(line.split()[0] == "1" for line in lines[1:])


def test_state_of_a_key_found_through_the_partitioner(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "user-3"
    status, out, _ = read(
        capsys,
        "state",
        "--store",
        str(store),
        "--key",
        key,
        "--partitions",
        str(PARTITIONS),
        "--format",
        "jsonl",
    )
    row = json.loads(out)
    assert status == 0
    assert row["partition"] == partition_of(key, PARTITIONS)
    first_in_partition = next(
        f"user-{i}" for i in range(12) if partition_of(f"user-{i}", PARTITIONS) == row["partition"]
    )
    assert row["key"] == key and row["value"] == (2 if key == first_in_partition else 1)
    assert row["offset"] == 20


def test_state_without_a_partition_count_searches_every_partition(store: Path) -> None:
    present = [0, 1, 2, 3]
    order = search_order("user-3", present, None)
    assert sorted(order) == present and order[0] == partition_of("user-3", PARTITIONS)


def test_unknown_key_missing_store_and_missing_outputs_are_clear_errors(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = read(capsys, "state", "--store", str(store), "--key", "zombie")
    assert status == 1 and "'zombie' is not in the committed state of any of 4 partitions" in err
    status, _, err = read(capsys, "state", "--store", str(store), "--key", "user-3", "--partition", "9")
    assert status == 1 and "partition 9 has no commits" in err
    status, _, err = read(capsys, "output", "--store", str(tmp_path / "nowhere"))
    assert status == 1 and "no state store at" in err
    status, _, err = read(capsys, "output", "--store", str(store), "--output", str(tmp_path / "elsewhere"))
    assert status == 1 and "is --output" in err
