"""Work that runs beside the batches: a task's snapshot (sweeping the losers of decided batches,
writing the snapshot's runs, pruning older snapshots, compacting the changelog, pruning manifests) and a
replica's local checkpoint.

A snapshot of a large state takes seconds (sorting, encoding, merging runs, uploads), and on the batch
lane it stalled every partition's round, not just its own. Here it runs on a thread of its own: the lane
hands over the head it reached (and, for a checkpoint, what the store must copy at that head) and goes
on. Two threads (`WORKERS`): with one, a single large snapshot (25.8 s of merging at 50M keys) held
every other task's snapshot and checkpoint behind it; with more, background work would take more of the
cores the batches run on. A task has at most one snapshot in flight (`task.snapshot`), so its own
snapshots never overtake each other.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


WORKERS = 2


class Background:
    """A bounded pool of worker threads, started on first use; `wait` blocks until everything submitted
    is done."""

    def __init__(self, workers: int = WORKERS) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: set[Future[object]] = set()

    def submit(self, what: str, work: Callable[[], T]) -> Future[T]:
        """Run `work` on a background thread; a failure is logged here (the caller also sees it when
        it collects the result)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="background")
            future = self._pool.submit(work)
            self._pending.add(future)  # type: ignore[arg-type]
        future.add_done_callback(lambda done: self._finished(what, done))  # type: ignore[arg-type]
        return future

    def _finished(self, what: str, done: Future[object]) -> None:
        with self._lock:
            self._pending.discard(done)
        if done.cancelled():
            return
        error = done.exception()
        if error is not None:
            log.error("%s failed: %r", what, error)

    def wait(self) -> None:
        """Until every job submitted so far has finished (tools and tests that run until idle)."""
        with self._lock:
            pending = list(self._pending)
        wait(pending)
