"""Whether this replica still acts: what the operator's `/healthz` answers, and its liveness probe reads.

`/metrics` is served by a thread of its own, so it answered while the part that acts had stopped: an
event loop blocked by a call that never returns, or a reconcile hung on a write. A probe on it kept
such a replica alive, its Lease renewed by another thread, and every app unreconciled. `/healthz`
fails instead when, while this replica leads:

- the event loop that runs kopf's watches and the app loops has not run for `stall_after` (it beats
  every `BEAT_SECONDS`), or
- one app's reconcile has run for longer than `stuck_after` (every API call has a timeout, so a
  reconcile that long is not waiting on the API server).

A replica that waits for the Lease acts on nothing and is healthy: restarting it would not help.
The record is kept with an injectable clock, so its rules are tested without waiting.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Key = tuple[str, str]
BEAT_SECONDS = 1.0
STALL_SECONDS = 60.0
"""Longer than any pause of a healthy loop (a garbage collection, a burst of watch events)."""
STUCK_SECONDS = 600.0
"""Longer than any healthy reconcile: one of 100,000 tasks takes seconds of CPU
(bench/results/scale.md), and its writes, each bounded by a 60 s timeout, go out 8 at a time."""


@dataclass
class Health:
    """The beats of the acting event loop and the reconciles in flight (thread-safe)."""

    clock: Callable[[], float] = time.monotonic
    stall_after: float = STALL_SECONDS
    stuck_after: float = STUCK_SECONDS
    acting: bool = False
    beat_at: float | None = None
    running: dict[Key, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def act(self, acting: bool) -> None:
        """This replica starts (or stops) acting: leading, or running without leader election."""
        with self._lock:
            self.acting = acting
            self.beat_at = self.clock() if acting else None
            self.running.clear()

    def beat(self) -> None:
        """The event loop ran (called from a task on it every `BEAT_SECONDS`)."""
        with self._lock:
            self.beat_at = self.clock()

    def started(self, key: Key) -> None:
        """An app's reconcile began."""
        with self._lock:
            self.running[key] = self.clock()

    def ended(self, key: Key) -> None:
        """An app's reconcile returned or raised."""
        with self._lock:
            self.running.pop(key, None)

    def problem(self) -> str | None:
        """Why this replica is not healthy, or None."""
        with self._lock:
            if not self.acting:
                return None
            now = self.clock()
            if self.beat_at is None or now - self.beat_at > self.stall_after:
                silent = now - (self.beat_at or now)
                return f"the event loop that acts has not run for {silent:.0f} s"
            stuck = sorted((started, key) for key, started in self.running.items())
            if stuck and now - stuck[0][0] > self.stuck_after:
                (namespace, name) = stuck[0][1]
                return f"the reconcile of {namespace}/{name} has run for {now - stuck[0][0]:.0f} s"
            return None


async def beating(health: Health, stop: Callable[[], bool]) -> None:
    """Beat for `health` from the event loop it runs on until `stop()`: a blocked loop stops beating."""
    while not stop():
        health.beat()
        await asyncio.sleep(BEAT_SECONDS)
