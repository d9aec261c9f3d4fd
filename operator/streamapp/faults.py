"""Crash points for fault-injection tests: die by SIGKILL at a named place in the commit protocol.

`STREAMAPP_CRASH_AT=<point>[:<n>]` kills the process the `n`-th time (default 1st) it reaches `point`.
SIGKILL runs no cleanup and flushes nothing, exactly like a node loss or the OOM killer. With the
variable unset `reached` only bumps a counter. In-process tests can also run an action at a point
(`on`), for instance to hold a restore there while they watch the other tasks go on.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator

ENV = "STREAMAPP_CRASH_AT"
POINTS = (
    "batch.transformed",
    "batch.segment-written",
    "batch.outputs-written",
    "batch.committed",
    "publish.produced",
    "publish.committed",
    "restore.segment-applied",
    "snapshot.written",
    "checkpoint.persisted",
)

_counts: Counter[str] = Counter()
_actions: dict[str, Callable[[], None]] = {}


def parse(spec: str) -> tuple[str, int]:
    """`point[:n]` → (point, n); pure."""
    point, _, nth = spec.partition(":")
    if point not in POINTS:
        raise ValueError(f"unknown crash point {point!r}: one of {', '.join(POINTS)}")
    return point, int(nth) if nth else 1


def reached(point: str) -> None:
    """Mark `point`; kill this process if the environment asks for a crash here now."""
    _counts[point] += 1
    action = _actions.get(point)
    if action is not None:
        action()
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, nth = parse(spec)
    if target == point and _counts[point] == nth:
        os.kill(os.getpid(), signal.SIGKILL)


@contextlib.contextmanager
def on(point: str, action: Callable[[], None]) -> Iterator[None]:
    """Run `action` on the reaching thread each time `point` is reached, for the duration."""
    parse(point)
    _actions[point] = action
    try:
        yield
    finally:
        del _actions[point]
