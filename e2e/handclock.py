"""A clock a test moves by hand, for the parts that take an injected clock (leases, membership, health,
the drain): rules about time are tested without waiting for it."""

from __future__ import annotations


class HandClock:
    """Reads `now`; the test advances it (`clock.now += 30`)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
