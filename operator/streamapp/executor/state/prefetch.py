"""Reading a partition's history ahead of applying it: manifests and their segments fetched concurrently.

A copy far behind (a member back after a long absence, a warmup that starts from an old snapshot)
replays manifest after manifest, and each one is a round trip to the shared store for the manifest and
one per segment. On S3 that is tens of milliseconds each, so a delta of thousands of batches spent most
of its time waiting for replies, one at a time. `Prefetch` keeps up to `MOST_AHEAD` manifests in
flight on a shared pool of readers, each followed by its segments as soon as it arrives, while the
copy applies them strictly in order (only an accepted manifest's segments are ever applied).

What it must not do is multiply the reads of a copy that is current: a standby at the head polls for
the next manifest every batch, and reading eight sequence numbers where one does not exist yet would
be eight requests per poll. So the window starts at one and grows by one with each manifest found
after the first; the first missing one ends it, and the next catch-up starts at one again. A copy at
the head, finding at most one new manifest a poll, reads exactly what it read without this; one behind
has `MOST_AHEAD` in flight after as many manifests.
Reads that were ahead of a missing manifest are dropped: sequence numbers are written in order, so a
later one seen before an earlier one was only a race with the owner, and the next catch-up reads it
again.
"""

from __future__ import annotations

import functools
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa

from streamapp.executor.state import changelog
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Manifest

MOST_AHEAD = 8
"""Manifests in flight at most per copy catching up: enough to hide a round trip of tens of
milliseconds behind the applying of the ones before it, bounded so a copy holds at most this many
manifests' segments in memory ahead of where it applies."""

READERS = 8
"""Threads shared by every copy of the executor for these reads: they wait on the network, not the CPU."""

Segments = list[Future[pa.Table]]


@functools.cache
def _readers() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="history-read")


class Prefetch:
    """The manifests of one partition from `start` on, read ahead of `take` (see the module)."""

    def __init__(self, layout: StateLayout, partition: int, start: int) -> None:
        self.layout = layout
        self.partition = partition
        self.next_seq = start
        self.found = 0
        self.pending: deque[tuple[int, Future[tuple[Manifest | None, Segments]]]] = deque()

    @property
    def at(self) -> int:
        """The sequence number `take` returns next."""
        return self.pending[0][0] if self.pending else self.next_seq

    def take(self, wanted: int | None = None) -> tuple[Manifest | None, Segments]:
        """The manifest at the next sequence number (None: not there) and its segments being read; a
        failed segment read raises from its future, which only an accepted manifest's applying asks.
        `wanted`: how many manifests the caller will take at most, this one included (none is read
        ahead past them)."""
        self._fill(MOST_AHEAD if wanted is None else wanted)
        seq, future = self.pending.popleft()
        found, segments = future.result()
        if found is None:
            self.restart(seq)
        else:
            self.found += 1
        return found, segments

    def restart(self, seq: int) -> None:
        """Read from `seq` on, one at a time again (the copy jumped, or reached the head)."""
        self.pending.clear()
        self.next_seq, self.found = seq, 0

    def _fill(self, wanted: int) -> None:
        while len(self.pending) < min(MOST_AHEAD, max(1, self.found), max(1, wanted)):
            self.pending.append((self.next_seq, _readers().submit(self._fetch, self.next_seq)))
            self.next_seq += 1

    def _fetch(self, seq: int) -> tuple[Manifest | None, Segments]:
        found = manifests.read(self.layout, self.partition, seq)
        if found is None:
            return None, []
        pool = _readers()
        return found, [pool.submit(changelog.read_table, self.layout, name) for name in found.segments]
