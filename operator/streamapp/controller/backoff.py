"""How the operator waits before trying again what failed: delays that double up to a cap, with jitter.

The cap bounds how long after the API server's return the operator is acting again; the jitter keeps
the operator's many watches and loops from all retrying at the same instant. Nothing here gives up:
like client-go's reflectors, a watch retries for as long as the process runs (each failure is logged).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass


def delay(failures: int, initial: float, cap: float, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after `failures` failures in a row: `initial` doubled per failure up to `cap`,
    its upper half random."""
    step = min(cap, initial * 2.0 ** max(0, failures - 1))
    return step / 2 + rand() * step / 2


@dataclass(frozen=True)
class Backoffs:
    """An endless series of `delay`s, new on every iteration: kopf's `networking.error_backoffs`
    iterates it afresh for every request and retries while it yields, i.e. forever (a finite series
    would end the watch, and with it the operator, once the API server is away longer than its sum)."""

    initial: float
    cap: float

    def __iter__(self) -> Iterator[float]:
        return (delay(failures, self.initial, self.cap) for failures in itertools.count(1))
