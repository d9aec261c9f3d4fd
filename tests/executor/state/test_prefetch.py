"""A copy far behind reads manifests and segments ahead, several at once; one at the head reads no more
than before (`executor/state/prefetch.py`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from dataplane_checks import commit

from streamapp.executor.state.blobstore import FileStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head
from streamapp.executor.state.prefetch import MOST_AHEAD
from streamapp.executor.state.replica import Replica, rebuild

BATCHES = 40
ROUND_TRIP = 0.02


class DistantStore(FileStore):
    """A filesystem store whose every read waits a round trip, as an object store's does; it counts
    the reads and the most in flight at once."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0
        self.reads = 0

    def get(self, name: str) -> bytes:
        with self.lock:
            self.in_flight += 1
            self.reads += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(ROUND_TRIP)
            return super().get(name)
        finally:
            with self.lock:
                self.in_flight -= 1


def history(tmp_path: Path) -> tuple[StateLayout, DistantStore]:
    """`BATCHES` batches of partition 0, each a manifest and one segment."""
    store = DistantStore(tmp_path / "state")
    layout = StateLayout(store)
    head = Head()
    for batch in range(BATCHES):
        head = commit(layout, head, {f"k{batch % 7}": batch, f"b{batch}": 1})
    return layout, store


def test_a_copy_far_behind_reads_ahead_and_applies_in_order(tmp_path: Path) -> None:
    layout, store = history(tmp_path)
    copy = Replica(layout, 0)
    store.reads = store.most_in_flight = 0
    assert copy.catch_up() == BATCHES
    assert copy.head.seq == BATCHES - 1
    assert store.most_in_flight > MOST_AHEAD // 2, "reads went one at a time"
    # Each manifest and segment once, the missing next manifest and what was in flight past it, and
    # the floor (whether the history was pruned past the missing one).
    assert store.reads <= 2 * BATCHES + MOST_AHEAD + 1
    assert dict(copy.state.items()) == dict(rebuild(layout, 0).state.items())


def test_a_copy_at_the_head_reads_one_manifest_a_poll(tmp_path: Path) -> None:
    layout, store = history(tmp_path)
    copy = Replica(layout, 0)
    copy.catch_up()
    store.reads = store.most_in_flight = 0
    for _ in range(5):
        assert copy.catch_up() == 0
    assert (store.reads, store.most_in_flight) == (5, 1)
    head = commit(layout, copy.head, {"new": 1})
    store.reads = 0
    assert copy.catch_up() == 1 and copy.head == head
    assert store.reads == 3, "the new manifest, its segment, the next one missing"


def test_a_limited_catch_up_stops_at_its_limit_reads_nothing_past_it_and_the_next_resumes_there(
    tmp_path: Path,
) -> None:
    """A copy tailing in bounded steps (`max_apply_per_step`) reads no manifest past its step's limit."""
    layout, store = history(tmp_path)
    copy = Replica(layout, 0)
    store.reads = 0
    assert copy.catch_up(limit=5) == 5 and copy.head.seq == 4
    assert store.reads == 2 * 5
    assert copy.catch_up(limit=30) == 30 and copy.head.seq == 34
    assert copy.catch_up() == BATCHES - 35
    assert dict(copy.state.items()) == dict(rebuild(layout, 0).state.items())
