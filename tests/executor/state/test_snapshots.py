"""Snapshots in format 2: sorted runs that merge to the state the history defines, incremental uploads,
checksums that catch damage, format-1 snapshots restored and converted, and streamed blobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dataplane_checks import commit
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.executor.state import changelog, runs, snapshots, tiers
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.blobstore import FileStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head
from streamapp.executor.state.replica import Replica, rebuild
from streamapp.executor.state.stores import rows_table

LONG = pa.int64()

# A change: key index → new value, None deleting the key.
changes = st.dictionaries(st.integers(0, 60), st.one_of(st.none(), st.integers(-5, 5)), max_size=40)


def key(index: int) -> str:
    return f"k{index:03d}" if index % 3 else f"é{index}"  # non-ASCII keys sort bytewise too


def as_table(change: dict[int, int | None]) -> pa.Table:
    return rows_table({key(i): v for i, v in change.items()}, "long")


def apply(model: dict[str, int], change: dict[int, int | None]) -> None:
    for index, value in change.items():
        if value is None:
            model.pop(key(index), None)
        else:
            model[key(index)] = value


def contents(store: FileStore, written: list[runs.Run]) -> dict[str, Any]:
    """What applying `written` in order leaves, tombstones deleting."""
    found: dict[str, Any] = {}
    for run in written:
        for batch in runs.read(store, run):
            for k, v in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist(), strict=True):
                if v is None:
                    found.pop(k, None)
                else:
                    found[k] = v
    return found


@settings(max_examples=40, deadline=None)
@given(history=st.lists(changes, min_size=1, max_size=6), data=st.data())
def test_merging_any_newest_runs_keeps_the_state_and_sorts_each_run(
    tmp_path_factory: pytest.TempPathFactory, history: list[dict[int, int | None]], data: st.DataObject
) -> None:
    store = FileStore(tmp_path_factory.mktemp("runs"))
    model: dict[str, int] = {}
    written = []
    for index, change in enumerate(history):
        apply(model, change)
        rows = runs.newest_per_key([as_table(change)], drop_tombstones=index == 0)
        written.append(runs.write(store, runs.unique_name("r", index), LONG, [rows]))
    count = data.draw(st.integers(2, max(2, len(written))))
    if len(written) >= 2:
        bottom = count >= len(written)
        merged = runs.merge(store, written[-count:], runs.unique_name("r", 99), LONG, bottom)
        written = [*written[:-count], merged]
        keys = [k for batch in runs.read(store, merged) for k in batch.column("key").to_pylist()]
        assert keys == sorted(keys, key=str.encode), "a run is sorted bytewise, each key once"
        assert len(keys) == len(set(keys))
        if bottom:
            assert all(v is not None for b in runs.read(store, merged) for v in b.column("value").to_pylist())
    assert contents(store, written) == model


def test_a_merge_holds_a_batch_per_run_not_the_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs, "BATCH_ROWS", 1_000)
    store = FileStore(tmp_path)
    older = rows_table({f"k{i:06d}": i for i in range(0, 20_000, 2)}, "long")
    newer = rows_table({f"k{i:06d}": -i for i in range(0, 20_000, 3)}, "long")
    written = [
        runs.write(store, f"r/{n}", LONG, [runs.newest_per_key([t], True)])
        for n, t in enumerate([older, newer])
    ]
    sizes = []
    for piece in runs._merged(store, written, bottom=True):
        sizes.append(piece.num_rows)
    assert max(sizes) <= 2_000, "each step holds at most one batch of each run"
    merged = runs.merge(store, written, "r/m", LONG, bottom=True)
    expected = {f"k{i:06d}": (-i if i % 3 == 0 else i) for i in range(20_000) if i % 2 == 0 or i % 3 == 0}
    assert contents(store, [merged]) == expected


@given(st.lists(st.integers(0, 10_000), min_size=0, max_size=30))
def test_tiers_keep_few_runs_and_merge_only_pairs_or_more(rows: list[int]) -> None:
    kept = list(rows)
    while count := tiers.merge_count(kept):
        assert 2 <= count <= len(kept)
        kept = [*kept[:-count], sum(kept[-count:])]
    assert len(kept) <= tiers.MAX_RUNS
    if len(kept) >= 2:
        assert kept[-2] > tiers.FACTOR * kept[-1], "the newest run is left only while much smaller"


def test_a_damaged_run_is_refused_and_an_older_snapshot_restores(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    head = commit(layout, Head(), {"a": 1, "b": 2})
    first = snapshots.write(layout, 0, head, "long")
    head = commit(layout, head, {"b": 3})
    second = snapshots.write(layout, 0, head, "long")
    damaged = second.runs[-1]
    path = tmp_path / damaged.name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises((runs.CorruptRun, OSError, pa.ArrowInvalid)):
        list(runs.read(layout.store, damaged))
    replica = Replica(layout, 0)
    replica.load_snapshot()
    assert replica.head == first.head, "the damaged newest snapshot is skipped"
    replica.catch_up()
    assert dict(replica.state.items()) == {"a": 1, "b": 3}
    intact = first.runs[0]
    with pytest.raises(runs.CorruptRun, match="sha256"):
        list(runs.read(layout.store, runs.Run(intact.name, intact.rows, intact.size, "0" * 64)))
    with pytest.raises(runs.CorruptRun, match="rows"):
        list(runs.read(layout.store, runs.Run(intact.name, intact.rows + 1, intact.size, intact.sha256)))


def uploaded(tmp_path: Path) -> int:
    return sum(path.stat().st_size for path in (tmp_path / "runs").rglob("*.arrows"))


def test_a_snapshot_uploads_what_changed_and_shares_the_rest(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    head = commit(layout, Head(), {f"k{i:06d}": i for i in range(50_000)})
    first = snapshots.write(layout, 0, head, "long")
    before = uploaded(tmp_path)
    model = {f"k{i:06d}": i for i in range(50_000)}
    for step in range(3):
        change: dict[str, Any] = {f"k{i:06d}": -step for i in range(step, 50_000, 997)}
        change[f"k{step:06d}x"] = None  # a tombstone of a key that never existed
        change["k000010"] = None
        head = commit(layout, head, change)
        model.update({k: v for k, v in change.items() if v is not None})
        model.pop("k000010", None)
    second = snapshots.write(layout, 0, head, "long")
    assert second.runs[0] == first.runs[0], "the unchanged run is shared, not uploaded again"
    assert len(second.runs) == 2
    assert uploaded(tmp_path) - before < before / 20, "only the changed rows were uploaded"
    restored = Replica(layout, 0)
    restored.load_snapshot()
    assert restored.head == head
    assert dict(restored.state.items()) == model == dict(rebuild(layout, 0).state.items())
    snapshots.prune(layout, 0, keep=1)
    assert snapshots.newest_first(layout, 0) == [layout.snapshot(0, head.seq)]
    listed = {run.name for run in second.runs}
    assert {f"runs/p=0/{p.name}" for p in (tmp_path / "runs/p=0").iterdir()} == listed, "unlisted runs pruned"


def test_a_snapshot_finished_late_does_not_replace_the_one_published_at_its_sequence(tmp_path: Path) -> None:
    """A revoked owner's snapshot job that finishes after the new owner published the same sequence
    leaves the published one (whose runs the new owner's pruning keeps) in place."""
    layout = StateLayout(tmp_path)
    first = commit(layout, Head(), {"a": 1, "b": 2})
    snapshots.write(layout, 0, first, "long")
    head = commit(layout, first, {"a": 3})
    published: list[snapshots.Snapshot] = []

    class Overtaken(FileStore):
        """The revoked owner's view: its runs are uploaded when the new owner publishes the sequence."""

        def _publishing(self, name: str) -> None:
            if name.startswith("snapshots/") and not published:
                published.append(snapshots.write(layout, 0, head, "long"))

        def create(self, name: str, data: bytes) -> bool:
            self._publishing(name)
            return super().create(name, data)

        def put(self, name: str, data: bytes) -> None:
            self._publishing(name)
            super().put(name, data)

    late = snapshots.write(StateLayout(Overtaken(tmp_path)), 0, head, "long")
    assert late == published[0]
    assert snapshots.read(layout, layout.snapshot(0, head.seq)) == published[0]
    restored = Replica(layout, 0)
    restored.load_snapshot()
    assert restored.head == head and dict(restored.state.items()) == {"a": 3, "b": 2}


def test_a_descriptor_that_cannot_be_restored_from_is_replaced(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    head = commit(layout, Head(), {"a": 1})
    broken = snapshots.write(layout, 0, head, "long")
    for run in broken.runs:
        layout.store.delete(run.name)
    replaced = snapshots.write(layout, 0, head, "long")
    assert replaced != broken
    restored = Replica(layout, 0)
    restored.load_snapshot()
    assert dict(restored.state.items()) == {"a": 1}


def test_a_format_1_snapshot_restores_and_is_converted_by_the_next_snapshot(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    state = {f"k{i:04d}": i for i in reversed(range(3_000))}  # unsorted, as a dict wrote it
    head = commit(layout, Head(), state)
    meta = {b"streamapp.seq": b"0", b"streamapp.offset": str(head.offset).encode(), b"streamapp.epoch": b"1"}
    legacy = tmp_path / "snapshots/p=0/000000000000.parquet"
    legacy.parent.mkdir(parents=True)
    pq.write_table(rows_table(state, "long").replace_schema_metadata(meta), legacy, compression="lz4")
    (tmp_path / "changelog/p=0").joinpath(
        Path(changelog.base(manifests.read(layout, 0, 0).segments[0]))
    ).unlink()

    replica = Replica(layout, 0)
    assert replica.load_snapshot() == 3_000
    assert dict(replica.state.items()) == state

    head = commit(layout, head, {"k0001": -1, "new": 7})
    written = snapshots.write(layout, 0, head, "long")
    assert json.loads((tmp_path / layout.snapshot(0, head.seq)).read_bytes())["format"] == 2
    assert written.runs, "the format-1 snapshot became a run"
    restored = Replica(layout, 0)
    restored.load_snapshot()
    assert dict(restored.state.items()) == {**state, "k0001": -1, "new": 7}
    snapshots.prune(layout, 0, keep=1)
    assert not legacy.exists(), "the converted format-1 snapshot is pruned like any other"


@settings(max_examples=25, deadline=None)
@given(history=st.lists(changes, min_size=1, max_size=10), every=st.integers(1, 4))
def test_snapshots_written_in_small_groups_restore_the_history(
    tmp_path_factory: pytest.TempPathFactory, history: list[dict[int, int | None]], every: int
) -> None:
    layout = StateLayout(tmp_path_factory.mktemp("history"))
    head = Head()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(snapshots, "DELTA_ROWS", 10)  # many runs per snapshot, merged as they come
        for index, change in enumerate(history):
            head = commit(layout, head, {key(i): v for i, v in change.items()})
            if index % every == every - 1:
                written = snapshots.write(layout, 0, head, "long")
                assert len(written.runs) <= tiers.MAX_RUNS
    restored = Replica(layout, 0)
    restored.load_snapshot()
    restored.catch_up()
    model: dict[str, int] = {}
    for change in history:
        apply(model, change)
    assert dict(restored.state.items()) == model
