"""Event-time expiry of windowed state: windows close a configurable lateness after the newest one.

A windowed pipeline keeps one state row per key and window; without expiry that state grows for as
long as the app runs. A pipeline that declares `window_end` (event time, in epoch seconds, at which a
state key's window ends) and a `lateness` gets a watermark per partition: the newest window end in its
state minus the lateness. At every batch the owner

* drops updates to windows that ended before the watermark (records too late to count: their window
  is final and may already have expired), and
* deletes the state rows of windows that ended before the watermark, as tombstones (rows with a null
  value) in the batch's changelog segment and outputs, so every copy of the task deletes them too and
  output readers learn that the window is final. Finding them scans the store, so it happens only in
  batches where the watermark has passed the oldest window end in the state (tracked as a bound).

The watermark is a function of the committed state alone, so whoever owns the partition computes the
same one; the owner recomputes it from its store once when it takes over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from streamapp.executor.state.stores import KeyedStore

WindowEnd = Callable[[str], float]


@dataclass
class Expiry:
    """The watermark of one partition and what it lets through."""

    window_end: WindowEnd
    lateness: float
    newest: float = float("-inf")
    oldest: float = float("inf")

    @property
    def watermark(self) -> float:
        return self.newest - self.lateness

    def observe(self, keys: Iterable[str]) -> None:
        """Move the watermark by keys that are now in the state."""
        for key in keys:
            end = self.window_end(key)
            self.newest = max(self.newest, end)
            self.oldest = min(self.oldest, end)

    def admit(self, changed: dict[str, Any]) -> dict[str, Any]:
        """The batch's changed rows without those of windows that already ended before the watermark."""
        watermark = self.watermark
        return {key: value for key, value in changed.items() if self.window_end(key) >= watermark}

    def expire(self, store: KeyedStore, changed: dict[str, Any]) -> dict[str, Any]:
        """`changed` plus a tombstone for every stored window that ended before the watermark."""
        watermark = self.watermark
        if self.oldest >= watermark:
            return changed
        gone: dict[str, Any] = {}
        self.oldest = min((self.window_end(key) for key in changed), default=float("inf"))
        for key, _ in store.items():
            end = self.window_end(key)
            if end < watermark and key not in changed:
                gone[key] = None
            else:
                self.oldest = min(self.oldest, end)
        return {**changed, **gone}
