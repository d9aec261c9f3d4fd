"""The members of an app, classified the way every protocol needs them (Kafka Streams' ClientState).

A member is *live* when its pod is ready and its static id is below `replicas`: it may receive work.
It is *draining* when its pod is ready but scale-in removed its id, or a rolling update is about to
replace its pod (`retiring`): it keeps what it owns until successors are ready, and gets nothing new.
Anything else is not alive; of those, a member whose pod is visibly starting again is *returning*.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamapp.rebalance.model import MemberView


@dataclass(frozen=True)
class Roster:
    """Members by id plus the lag index, built once per planning step."""

    members: Mapping[int, MemberView]
    replicas: int
    live: tuple[int, ...]
    draining: tuple[int, ...]
    acceptable_lag: int
    _lags_by_task: Mapping[int, tuple[tuple[int, int], ...]]

    @staticmethod
    def build(members: Iterable[MemberView], replicas: int, acceptable_lag: int) -> Roster:
        """Index members by id; members with a duplicate id are a shell bug and rejected."""
        by_id: dict[int, MemberView] = {}
        for m in members:
            if m.id in by_id:
                raise ValueError(f"member {m.id} observed twice")
            if m.capacity <= 0:
                raise ValueError(f"member {m.id}: capacity must be > 0, got {m.capacity}")
            by_id[m.id] = m
        ids = sorted(by_id)
        live = tuple(i for i in ids if by_id[i].alive and i < replicas and not by_id[i].retiring)
        draining = tuple(i for i in ids if by_id[i].alive and (i >= replicas or by_id[i].retiring))
        lags: dict[int, list[tuple[int, int]]] = {}
        for i in live:
            for task, lag in by_id[i].lags.items():
                lags.setdefault(task, []).append((lag, i))
        return Roster(
            members=by_id,
            replicas=replicas,
            live=live,
            draining=draining,
            acceptable_lag=acceptable_lag,
            _lags_by_task={t: tuple(sorted(v)) for t, v in lags.items()},
        )

    def alive(self, member: int) -> bool:
        """Whether the member's pod is ready (live or draining)."""
        view = self.members.get(member)
        return view is not None and view.alive

    def is_live(self, member: int) -> bool:
        """Whether the member may receive new work (alive, wanted, and not being replaced)."""
        view = self.members.get(member)
        return member < self.replicas and view is not None and view.alive and not view.retiring

    def is_upcoming(self, member: int) -> bool:
        """Whether the member is live and a rolling update hands it off next (`MemberView.upcoming`)."""
        return self.is_live(member) and self.members[member].upcoming

    def is_draining(self, member: int) -> bool:
        """Whether the member is alive but leaving (scale-in or a rolling update)."""
        return self.alive(member) and not self.is_live(member)

    def gone(self, member: int) -> bool:
        """Whether nothing of the member runs any more: not alive, and no pod of it being deleted."""
        view = self.members.get(member)
        return view is None or (not view.alive and not view.stopping)

    def returning(self, member: int) -> bool:
        """Whether the member is not alive but its pod is visibly starting again."""
        view = self.members.get(member)
        return view is not None and not view.alive and view.returning

    def reported(self, member: int) -> bool:
        """Whether the member's current pod has reported (its lags describe its local state)."""
        view = self.members.get(member)
        return view is not None and view.reported

    def acked(self, member: int) -> int:
        """The newest generation the member has applied (0 when never seen)."""
        view = self.members.get(member)
        return view.acked_generation if view is not None else 0

    def capacity(self, member: int) -> float:
        """Relative processing capacity (1.0 unless the shell says otherwise)."""
        view = self.members.get(member)
        return view.capacity if view is not None else 1.0

    def zone(self, member: int) -> str | None:
        """The member's failure domain, when known."""
        view = self.members.get(member)
        return view.zone if view is not None else None

    def lag(self, member: int, task: int) -> int | None:
        """Records the member still has to apply for `task`; None when it has no state for it."""
        view = self.members.get(member)
        return view.lags.get(task) if view is not None else None

    def caught_up(self, member: int, task: int) -> bool:
        """Lag within `acceptableRecoveryLag` (KIP-441's definition of caught up)."""
        lag = self.lag(member, task)
        return lag is not None and lag <= self.acceptable_lag

    def store_epochs(self, partitions: int) -> list[int]:
        """Per task, the highest epoch any member (alive or not) has seen in the store; 0 when none."""
        floor = [0] * partitions
        for view in self.members.values():
            for task, epoch in view.store_epochs.items():
                if 0 <= task < partitions:
                    floor[task] = max(floor[task], epoch)
        return floor

    def lags_for(self, task: int) -> tuple[tuple[int, int], ...]:
        """(lag, member) of every live member with state for `task`, most caught up first."""
        return self._lags_by_task.get(task, ())
