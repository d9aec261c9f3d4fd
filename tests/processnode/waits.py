"""Waiting in the process-node tests: poll a condition a few times a second, fail with what never came."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(check: Callable[[], object], what: str) -> None:
    """Return once `check()` is truthy; fail after 30 s, naming `what`."""
    for _ in range(600):
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")
