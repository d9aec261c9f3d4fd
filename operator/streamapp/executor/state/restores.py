"""How fast this executor restores state from the shared store: what a lost task's restore costs.

The operator weighs waiting for a lost member against restoring its tasks elsewhere
(`rebalance.recovery`), and needs each side in seconds. A task's restore size comes from its owner
(`Replica.cold_rows`); the speed comes from here: every row a copy restores — a snapshot loaded, the
segments of a manifest applied, while active or in the background — is counted, across every task of
the process, over the wall time during which at least one restore step was running.

That is the member's restore *throughput*, all its restores together. Restores running side by side
share what bounds them — the member's network to the store, or the CPU that applies rows under
Python's GIL — so two restores at once each proceed at about half of it. Summing each step's own
seconds instead (as this meter once did) measured the rate of one restore among however many ran with
it, a figure that changed with the concurrency of the moment and matched no estimate: the engine
now queues the restores a member runs and divides its throughput among them.

A rate is reported only once `MIN_ROWS` rows were restored: below that, the time of opening and
listing files dominates and the rate would say restores are far slower than they are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MIN_ROWS = 10_000


class RestoreStep:
    """One restore step under way: the rows it restored count as they are appended, so a long step (a
    snapshot of millions of rows) is not a stretch of time without rows until it ends."""

    def __init__(self, meter: RestoreMeter) -> None:
        self._meter = meter

    def append(self, rows: int) -> None:
        """Count `rows` restored by this step."""
        self._meter.count(rows)


class RestoreMeter:
    """Rows restored, and the wall seconds during which at least one restore step ran (the union of
    the steps' intervals), over an executor's copies; thread-safe: the copy lane restores on several
    threads. `clock` is monotonic seconds (injected by tests)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.rows = 0
        self._busy = 0.0
        self._running = 0
        self._since = 0.0
        self.full_restores: dict[str, int] = {}

    def fell_back(self, reason: str) -> None:
        """A copy with local state restored in full anyway, for `reason` (counted for the metrics)."""
        with self._lock:
            self.full_restores[reason] = self.full_restores.get(reason, 0) + 1

    def full_restore_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self.full_restores)

    @contextmanager
    def timing(self) -> Iterator[RestoreStep]:
        """Time a restore step; the caller appends the rows it restores to the yielded step."""
        with self._lock:
            if self._running == 0:
                self._since = self._clock()
            self._running += 1
        try:
            yield RestoreStep(self)
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self._busy += self._clock() - self._since

    def count(self, rows: int) -> None:
        """Count `rows` restored by a step under way."""
        if rows <= 0:
            return
        with self._lock:
            self.rows += rows

    def rate(self) -> float | None:
        """Rows restored a second, all restores together, over everything measured (the steps running
        now included); None until `MIN_ROWS` rows were."""
        with self._lock:
            seconds = self._busy + (self._clock() - self._since if self._running else 0.0)
            if self.rows < MIN_ROWS or seconds <= 0:
                return None
            return round(self.rows / seconds, 1)
