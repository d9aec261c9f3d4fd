"""Work that runs beside the batches: a task's snapshot (sweeping the losers of decided batches,
writing the snapshot's runs, pruning older snapshots, compacting the changelog, pruning manifests) and a
replica's local checkpoint.

A snapshot of a large state takes seconds (sorting, encoding, merging runs, uploads), and on the batch
lane it stalled every partition's round, not just its own. Here it runs on a thread of its own: the lane
hands over the head it reached (and, for a checkpoint, what the store must copy at that head) and goes
on. One thread, so snapshots of different tasks queue instead of competing with the batches for the
cores.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class Background:
    """A single worker thread, started on first use; `wait` blocks until everything submitted is done."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: set[Future[object]] = set()

    def submit(self, what: str, work: Callable[[], T]) -> Future[T]:
        """Run `work` on the background thread; a failure is logged here (the caller also sees it when
        it collects the result)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="background")
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
