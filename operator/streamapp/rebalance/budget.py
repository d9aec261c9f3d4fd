"""How many warmups may catch up at once: a budget per destination member, with an optional app-wide cap.

Kafka's `max.warmup.replicas` is one number for the whole group, so the migration rate of an app does
not grow with the app: at 900 tasks a scale-out with the default 2 takes over a hundred rounds, and an
app that raises it for speed lets one member restore dozens of tasks while another restores none. What
a warmup loads is its *destination* — it replays the task's changelog from the shared store into the
destination's local state (disk, network, CPU), while the owner keeps processing untouched — so the
budget is counted where the load lands: each member that receives tasks warms at most
`maxWarmupReplicas` at once, and a scale-out to several new members warms on all of them in parallel.
`maxWarmupReplicasTotal` (0: no cap) bounds the sum, for a store whose read bandwidth is the limit.

A standby is already warm and costs nothing here; a revoked task's successor has caught up and no
longer restores, so it does not count either. The restore of a task that is *down* — a lost member's,
under `lostTaskRecovery: auto` — is not a warmup: it starts whatever the budget says (nobody processes
the task meanwhile), paced instead by its destination's restore throughput (`recovery`), and takes its
destination's slots. A destination with such restores running or queued (`busy`) starts and keeps no
optional copy until they are done: its throughput is shared by every restore it runs, and an optional
copy there would slow a restore of a task nobody processes. Insurance copies of tasks that wait for
their member are down tasks' copies too, counted within the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WarmupBudget:
    """Slots left for warmups in one planning step, per destination and in all."""

    per_member: int
    total: int = 0
    busy: frozenset[int] = frozenset()
    _used: dict[int, int] = field(default_factory=dict)
    _used_total: int = 0

    def admit(self, member: int, down: bool = False) -> bool:
        """Take a slot on `member` if it and the app have one left and, for an optional copy (not of a
        task that is `down`), if `member` is not `busy` restoring down tasks; False (nothing taken)
        otherwise."""
        if member in self.busy and not down:
            return False
        if self._used.get(member, 0) >= self.per_member:
            return False
        if self.total and self._used_total >= self.total:
            return False
        self.take(member)
        return True

    def take(self, member: int) -> None:
        """Take a slot on `member` whether or not one is left: a restore that must run (see above)."""
        self._used[member] = self._used.get(member, 0) + 1
        self._used_total += 1
