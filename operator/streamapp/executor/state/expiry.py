"""Event-time expiry of windowed state: windows close a configurable lateness after the newest one.

A windowed pipeline keeps one state row per key and window; without expiry that state grows for as
long as the app runs. A pipeline that declares `window_end` (event time, in epoch seconds, at which a
state key's window ends) and a `lateness` gets a watermark per partition: the newest window end in its
state minus the lateness. At every batch the owner

* drops updates to windows that ended before the watermark (records too late to count: their window
  is final and may already have expired), and
* deletes the state rows of windows that ended before the watermark, as tombstones (rows with a null
  value) in a batch's changelog segment and outputs, so every copy of the task deletes them too and
  output readers learn that the window is final. Finding them scans the store, so a scan starts only
  when the watermark has passed the oldest window end in the state (tracked as a bound), and it runs
  beside the batches (`Sweep`): the batch after it finishes carries its tombstones. A window found
  expired stays expired (window ends are fixed and the watermark only rises; `admit` keeps later
  records out of it), so a sweep's result is still right a few batches later.

The watermark is a function of the committed state alone, so whoever owns the partition computes the
same one. Each batch manifest records the bounds as of its commit (`WindowEnds`), and a copy keeps the
last accepted batch's, so a new owner picks the watermark up with the history instead of scanning its
store at takeover (a scan of a large state would hold the task still for as long as it takes); it scans
only when the history does not say (batches committed before the bounds were recorded, or a copy whose
head came from a snapshot or a checkpoint with no batch applied since).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

WindowEnd = Callable[[str], float]


@dataclass(frozen=True)
class WindowEnds:
    """The newest window end in a partition's state and a lower bound of its oldest (inf: no window
    left), as of one committed batch."""

    newest: float
    oldest: float

    def to_json(self) -> dict[str, float | None]:
        """JSON has no infinity: an oldest of inf (every window expired) is written as null."""
        return {"newest": self.newest, "oldest": None if self.oldest == float("inf") else self.oldest}

    @staticmethod
    def from_json(body: dict[str, Any]) -> WindowEnds:
        oldest = body.get("oldest")
        return WindowEnds(float(body["newest"]), float("inf") if oldest is None else float(oldest))


@dataclass(frozen=True)
class Sweep:
    """What a scan of the store found: the keys of windows that ended before `watermark`, and the
    oldest window end among the others (inf when none is left)."""

    watermark: float
    expired: tuple[str, ...]
    oldest: float


@dataclass
class Expiry:
    """The watermark of one partition and what it lets through.

    `oldest` bounds the oldest window end in the state from below; `observed_since_sweep` is the oldest
    end observed since the running sweep took its keys, which its result does not know of.
    """

    window_end: WindowEnd
    lateness: float
    newest: float = float("-inf")
    oldest: float = float("inf")
    observed_since_sweep: float = field(default=float("inf"))

    @property
    def watermark(self) -> float:
        return self.newest - self.lateness

    def ends(self) -> WindowEnds | None:
        """The bounds to record with a batch; None while no window was ever seen (nothing to record)."""
        return WindowEnds(self.newest, self.oldest) if self.newest > float("-inf") else None

    def resume(self, ends: WindowEnds) -> None:
        """Take over the bounds the history recorded, instead of observing every key of the store."""
        self.newest, self.oldest = ends.newest, ends.oldest

    def observe(self, keys: Iterable[str]) -> None:
        """Move the watermark by keys that are now in the state."""
        for key in keys:
            end = self.window_end(key)
            self.newest = max(self.newest, end)
            self.oldest = min(self.oldest, end)
            self.observed_since_sweep = min(self.observed_since_sweep, end)

    def admit(self, changed: dict[str, Any]) -> dict[str, Any]:
        """The batch's changed rows without those of windows that already ended before the watermark."""
        watermark = self.watermark
        return {key: value for key, value in changed.items() if self.window_end(key) >= watermark}

    def due(self) -> bool:
        """Whether some window in the state may have ended before the watermark: a sweep is worth it."""
        return self.oldest < self.watermark

    def start_sweep(self) -> float:
        """A sweep starts (on the batch lane): the watermark it sweeps against. Ends observed from now
        on are kept apart, since the sweep may not see their keys."""
        self.observed_since_sweep = float("inf")
        return self.watermark

    def sweep(self, keys: Iterable[str], watermark: float) -> Sweep:
        """Scan `keys` against `watermark`: reads only `window_end`, so it runs on another thread while
        the batches go on."""
        expired, oldest = [], float("inf")
        for key in keys:
            end = self.window_end(key)
            if end < watermark:
                expired.append(key)
            else:
                oldest = min(oldest, end)
        return Sweep(watermark, tuple(expired), oldest)

    def settle(self, found: Sweep) -> None:
        """Take a finished sweep's bound (its tombstones go into the batch that takes it)."""
        self.oldest = min(found.oldest, self.observed_since_sweep)
