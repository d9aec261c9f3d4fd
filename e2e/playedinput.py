"""The input of an app whose members are played without Spark (`simulatedplane.SimulatedDataPlane`).

Every partition's source grows at the same rate, which the test sets and may change at any time; what
the owners process is committed per partition in one place, as the commit manifests are, so a task
that moves goes on from where its last owner committed and its source end does not jump. That is all
the operator's autoscaler reads of it: source ends and applied offsets (`controller/scaling.py`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable


class PlayedInput:
    """The sources and committed offsets of `partitions` tasks, safe to share between member threads."""

    def __init__(self, partitions: int, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._rate = rate
        self._lock = threading.Lock()
        self._ends = [0.0] * partitions
        self._committed = [0.0] * partitions
        self._at = clock()

    def set_rate(self, rate: float) -> None:
        """Records a second arriving over all partitions from now on (what arrived so far stays)."""
        with self._lock:
            self._grow()
            self._rate = rate

    def position(self, task: int) -> tuple[int, int]:
        """Where `task` stands: its committed offset and its source's end."""
        with self._lock:
            self._grow()
            return int(self._committed[task]), int(self._ends[task])

    def process(self, tasks: Iterable[int], budget: float) -> float:
        """Commit up to `budget` records of what waits on `tasks`, shared evenly: a task with less waiting
        than its share leaves the rest to the others, as a member busy only while it has input does.
        The records processed."""
        with self._lock:
            self._grow()
            waiting = sorted((self._ends[t] - self._committed[t], t) for t in tasks)
            done = 0.0
            for i, (backlog, task) in enumerate(waiting):
                take = min(backlog, (budget - done) / (len(waiting) - i))
                self._committed[task] += take
                done += take
            return done

    def _grow(self) -> None:
        """Every source grown by what arrived since last looked at (the lock held)."""
        now = self.clock()
        arrived = self._rate * (now - self._at) / len(self._ends)
        self._ends = [end + arrived for end in self._ends]
        self._at = now
