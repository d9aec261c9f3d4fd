"""The pure rules of the commit history and the atomic create they rely on."""

from __future__ import annotations

import math
import multiprocessing
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.executor.state import manifest as manifests
from streamapp.executor.state import storage
from streamapp.executor.state.blobstore import FileStore
from streamapp.executor.state.expiry import WindowEnds
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Conflict, Fenced, Head, Kind, Manifest, advance, judge_conflict


def batch(seq: int, epoch: int, start: int, end: int) -> Manifest:
    return Manifest(seq=seq, epoch=epoch, kind=Kind.BATCH, start=start, end=end, segments=(f"s{seq}",))


def test_accepted_batches_move_the_head() -> None:
    step = advance(Head(), batch(0, 1, 0, 10))
    assert step.accepted
    assert step.head == Head(seq=0, offset=10, epoch=1)


def test_a_manifest_with_an_epoch_below_the_fence_is_refused_but_takes_its_seq() -> None:
    fenced = Head(seq=4, offset=100, epoch=3)
    step = advance(fenced, batch(5, 2, 100, 120))
    assert not step.accepted
    assert step.head == Head(seq=5, offset=100, epoch=3)


def test_a_manifest_that_does_not_continue_the_input_is_refused() -> None:
    step = advance(Head(seq=0, offset=10, epoch=1), batch(1, 1, 5, 20))
    assert not step.accepted


def test_only_the_next_seq_can_be_examined() -> None:
    with pytest.raises(ValueError):
        advance(Head(seq=0), batch(2, 1, 0, 1))


def test_losing_to_a_higher_epoch_fences_and_to_an_equal_or_lower_one_retries() -> None:
    assert isinstance(judge_conflict(0, 1, batch(3, 2, 0, 1)), Fenced)
    assert isinstance(judge_conflict(0, 2, batch(3, 2, 0, 1)), Conflict)
    assert isinstance(judge_conflict(0, 2, batch(3, 1, 0, 1)), Conflict)


def test_manifest_json_round_trips() -> None:
    found = Manifest(seq=7, epoch=2, kind=Kind.FENCE, start=5, end=5, owner="m-1")
    assert Manifest.from_json(found.to_json()) == found
    timed = Manifest(seq=8, epoch=2, kind=Kind.BATCH, start=5, end=9, owner="m-1", committed_at=1_700.25)
    assert Manifest.from_json(timed.to_json()) == timed


@given(newest=st.floats(-1e12, 1e12), oldest=st.one_of(st.floats(-1e12, 1e12), st.just(math.inf)))
def test_window_bounds_round_trip_through_strict_json(newest: float, oldest: float) -> None:
    """Every window expired leaves an oldest of inf, which JSON cannot hold: it is written as null."""
    found = Manifest(seq=3, epoch=1, kind=Kind.BATCH, start=0, end=4, windows=WindowEnds(newest, oldest))
    text = found.to_json()
    assert b"Infinity" not in text
    assert Manifest.from_json(text) == found


def test_a_manifest_written_before_commit_times_reads_and_serializes_as_it_was() -> None:
    """No commit time, and the same canonical JSON: a checkpoint's digest of it still matches."""
    old = (
        b'{"epoch": 1, "input": {"end": 10, "start": 0}, "kind": "batch", "outputs": [], '
        b'"owner": "m-0", "segments": ["s0"], "seq": 0}'
    )
    found = Manifest.from_json(old)
    assert found.committed_at is None and found.owner == "m-0" and found.windows is None
    assert found.to_json() == old


def test_create_raises_fenced_for_the_older_writer(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    manifests.create(layout, 0, Manifest(seq=0, epoch=2, kind=Kind.FENCE, start=0, end=0))
    with pytest.raises(Fenced):
        manifests.create(layout, 0, batch(0, 1, 0, 10))
    assert manifests.read(layout, 0, 0) == Manifest(seq=0, epoch=2, kind=Kind.FENCE, start=0, end=0)


def _race(path: str, index: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    won = storage.create_exclusive(Path(path), f"writer {index}".encode())
    Path(f"{path}.won-{index}").write_text(str(won))


def test_exactly_one_of_many_racing_processes_creates_the_file(tmp_path: Path) -> None:
    target = tmp_path / "commits" / "000000000000.json"
    barrier = multiprocessing.Barrier(8)
    workers = [multiprocessing.Process(target=_race, args=(str(target), i, barrier)) for i in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    results = [Path(f"{target}.won-{i}").read_text() == "True" for i in range(8)]
    assert results.count(True) == 1
    assert target.read_bytes() == f"writer {results.index(True)}".encode()
    assert not [p for p in target.parent.iterdir() if p.name.startswith(storage.TMP_PREFIX)]


class CountingStore(FileStore):
    """Counts existence probes."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.probes = 0

    def exists(self, name: str) -> bool:
        self.probes += 1
        return super().exists(name)


@given(st.integers(-1, 300), st.integers(0, 300))
@settings(max_examples=40, deadline=None)
def test_the_newest_manifest_is_found_in_logarithmically_many_probes(after: int, new: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        store = CountingStore(Path(root))
        layout = StateLayout(store)
        for seq in range(after + new + 1):
            storage.ensure_dir(Path(root) / layout.commits(0))
            (Path(root) / layout.manifest(0, seq)).write_bytes(b"{}")
        assert manifests.latest_seq(layout, 0, after) == after + new
        assert store.probes <= 2 * math.ceil(math.log2(new + 1)) + 1, (new, store.probes)
