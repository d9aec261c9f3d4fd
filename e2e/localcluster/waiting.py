"""Bounded waiting for tests: poll a condition, fail with a message that says what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.2) -> T:
    """Return the first truthy result of ``check``; raise AssertionError naming ``what`` on timeout.

    The last value seen is part of the message so a failing test shows how far things got.
    """
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}; last seen: {last!r}")
        time.sleep(interval_s)
