"""How fast this executor restores state from the shared store: what a lost task's restore costs.

The operator weighs waiting for a lost member against restoring its tasks elsewhere
(`rebalance.recovery`), and needs each side in seconds. A task's restore size comes from its owner
(`Replica.cold_rows`); the speed comes from here: every row a copy restores — a snapshot loaded, the
segments of a manifest applied, while active or in the background — is counted with the time it
took, across every task of the process. A rate is reported only once `MIN_ROWS` rows were restored:
below that, the time of opening and listing files dominates and the rate would say restores are far
slower than they are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MIN_ROWS = 10_000


class RestoreMeter:
    """Rows restored and seconds spent restoring them, summed over an executor's copies (thread-safe:
    the copy lane restores on several threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rows = 0
        self.seconds = 0.0
        self.full_restores: dict[str, int] = {}

    def fell_back(self, reason: str) -> None:
        """A copy with local state restored in full anyway, for `reason` (counted for the metrics)."""
        with self._lock:
            self.full_restores[reason] = self.full_restores.get(reason, 0) + 1

    def full_restore_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self.full_restores)

    @contextmanager
    def timing(self) -> Iterator[list[int]]:
        """Time a restore step; the caller appends the rows it restored to the yielded list."""
        rows: list[int] = []
        began = time.perf_counter()
        try:
            yield rows
        finally:
            self.add(sum(rows), time.perf_counter() - began)

    def add(self, rows: int, seconds: float) -> None:
        """Count `rows` restored in `seconds` (a step that restored nothing is not counted)."""
        if rows <= 0:
            return
        with self._lock:
            self.rows += rows
            self.seconds += seconds

    def rate(self) -> float | None:
        """Rows restored a second, over everything measured; None until `MIN_ROWS` rows were."""
        with self._lock:
            if self.rows < MIN_ROWS or self.seconds <= 0:
                return None
            return round(self.rows / self.seconds, 1)
