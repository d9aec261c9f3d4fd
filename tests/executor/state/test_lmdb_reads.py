"""The LMDB store's many-key reads and appends, and what a fold reads when a batch's keys were read ahead.

Each keeps the store's answers exactly those of one key at a time: the reads only change how the
pages are fetched (several readers, key order) and the appends how they are filled.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.executor.io.source import FileLog
from streamapp.executor.merge import ReadAhead, fold, resolve
from streamapp.executor.state import lmdbstore
from streamapp.executor.state.lmdbstore import LOOKUP_SLICE, LmdbStore
from streamapp.executor.state.stores import MemoryStore


def table(rows: list[tuple[str, int | None]]) -> pa.Table:
    return pa.table({"key": [k for k, _ in rows], "value": pa.array([v for _, v in rows], pa.int64())})


@pytest.mark.parametrize("waits_for_disk", [False, True])
def test_many_keys_read_here_or_by_several_readers_answer_as_one_key_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, waits_for_disk: bool
) -> None:
    """The readers take over when the first keys' reads waited for the disk (major faults of the
    reading thread), which a test's small store never does by itself."""
    if waits_for_disk:
        monkeypatch.setattr(lmdbstore, "_major_faults", itertools.count().__next__)
    store = LmdbStore(tmp_path, "long")
    stored = {f"k{i:06d}": i for i in range(0, 3 * LOOKUP_SLICE, 2)}
    store.apply_table(table(sorted(stored.items())))
    asked = [f"k{i:06d}" for i in reversed(range(3 * LOOKUP_SLICE))] + ["k000002", "absent"]
    found = store.lookup(asked)
    assert set(found) == set(asked)
    assert all(found[key] == stored.get(key) == store.get(key) for key in asked)
    store.close()


@settings(max_examples=40, deadline=None)
@given(
    first=st.lists(st.integers(0, 300), unique=True).map(sorted),
    second=st.lists(st.tuples(st.integers(0, 300), st.one_of(st.none(), st.integers(0, 9)))),
)
def test_rows_in_key_order_are_appended_and_any_others_put_with_the_same_result(
    tmp_path_factory: object, first: list[int], second: list[tuple[int, int | None]]
) -> None:
    """A restore's first run into an empty store is appended; a later table in any order (repeated
    keys, tombstones, keys below the last) leaves what a dict would hold."""
    directory = tmp_path_factory.mktemp("lmdb")  # type: ignore[attr-defined]
    store, reference = LmdbStore(directory, "long"), MemoryStore()
    for rows in ([(f"k{i:03d}", i) for i in first], [(f"k{i:03d}", v) for i, v in second]):
        store.apply_table(table(rows))
        reference.apply_table(table(rows))
    assert dict(store.items()) == dict(reference.items())
    assert len(store) == len(reference)
    store.close()


def test_a_span_s_keys_are_read_without_spark(tmp_path: Path) -> None:
    log = FileLog(tmp_path)
    stamp = pa.array([0] * 4, pa.timestamp("us", tz="UTC"))
    for keys in (["a", "b", "a", "c"], ["d", "a", "e", "e"]):
        log.append(0, pa.table({"timestamp": stamp, "key": keys, "value": ["1"] * 4}))
    assert sorted(log.keys_in_process(0, 2, 7)) == ["a", "c", "d", "e"]
    assert log.keys_in_process(0, 8, 8) == []


def test_a_fold_reads_keys_read_ahead_from_them_and_any_other_from_the_store() -> None:
    """A transform that emits a key its input did not have still folds onto the stored value."""
    store = MemoryStore()
    store.upsert(["a", "b", "z"], [1, 2, 26])
    ahead = ReadAhead({"a": 10, "b": None}, store)
    changed = fold(ahead, ["a", "b", "z"], [1, 1, 1], resolve("sum"))
    assert changed == {"a": 11, "b": 1, "z": 27}
