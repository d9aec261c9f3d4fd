"""Streaks of write conflicts (409), made visible.

A reconcile whose write conflicts (the object changed since it was read: resourceVersion
precondition) plans again at once on what the watches show next; one conflict is routine. But a write
that conflicts on every try — another writer fighting the operator over the same object, a watch
that no longer delivers the object's new versions — used to retry silently forever: the app looked
merely slow. After `CONFLICTS_BEFORE_REPORT` conflicts in a row on the same object the app shows it,
through the failing-reconcile path (Degraded=ReconcileFailed with a message naming the object, and a
Warning Event); the next reconcile whose writes all succeed writes its conditions afresh, which
clears it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

CONFLICTS_BEFORE_REPORT = 10


def conflicting_object(body: str | None) -> str:
    """The object a 409 answer names ("streamappmembers counts-1"), from its Status `details`."""
    try:
        details = json.loads(body or "{}").get("details") or {}
    except (ValueError, AttributeError):
        details = {}
    kind, name = details.get("kind") or "object", details.get("name") or "(unnamed)"
    return f"{kind} {name}"


@dataclass
class Streak:
    """Consecutive conflicts of one app's reconciles, and on which object."""

    target: str | None = None
    count: int = 0

    def conflicted(self, target: str) -> bool:
        """Count a conflict on `target`; True exactly when the streak reaches the threshold (one
        report per streak)."""
        self.count = self.count + 1 if target == self.target else 1
        self.target = target
        return self.count == CONFLICTS_BEFORE_REPORT

    def message(self, error: str) -> str:
        return f"{self.count} writes in a row conflicted on {self.target}: {error}"

    def ended(self) -> None:
        """A reconcile got through: the streak is over."""
        self.target, self.count = None, 0
