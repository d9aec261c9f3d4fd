"""A minimal world of members around the pure engine, for property and convergence tests.

Members here are abstract: they acknowledge targets when told to, report lags the test chooses, and
process exactly the active tasks of the last target they applied. That last point is what lets the
tests check single ownership from the members' side (two members processing one task at the same
instant), not just from the shape of the assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamapp.rebalance import AppConfig, Assignment, MemberTarget, MemberView, Plan, member_targets, plan


@dataclass
class Member:
    """A member's pod and what it is doing."""

    id: int
    alive: bool = True
    zone: str | None = None
    capacity: float = 1.0
    acked: int = 0
    processing: frozenset[int] = frozenset()
    lags: dict[int, int] = field(default_factory=dict)


@dataclass
class World:
    """Members, the persisted assignment and a clock; every `replan` runs the real engine."""

    app: AppConfig
    members: dict[int, Member]
    assignment: Assignment
    now: float = 0.0
    history: list[Plan] = field(default_factory=list)

    @staticmethod
    def start(app: AppConfig, zones: tuple[str, ...] = (), capacities: tuple[float, ...] = ()) -> World:
        """A world with members 0..replicas-1 alive and nothing assigned yet."""
        members = {
            i: Member(
                i,
                zone=zones[i % len(zones)] if zones else None,
                capacity=capacities[i % len(capacities)] if capacities else 1.0,
            )
            for i in range(app.replicas)
        }
        return World(app, members, Assignment.empty(app.partitions))

    def views(self) -> list[MemberView]:
        """What the operator would observe."""
        return [
            MemberView(m.id, m.alive, m.zone, m.capacity, dict(m.lags), m.acked)
            for m in sorted(self.members.values(), key=lambda m: m.id)
        ]

    def replan(self) -> Plan:
        """Run the engine once and persist its result."""
        result = plan(self.app, self.views(), self.assignment, self.now)
        self.assignment = result.assignment
        self.history.append(result)
        return result

    def targets(self) -> dict[int, MemberTarget]:
        """Per-member targets of the current assignment."""
        return member_targets(self.assignment)

    def apply(self, member_id: int) -> None:
        """The member applies its current target: stops revoked tasks, starts new ones, acknowledges."""
        member = self.members[member_id]
        if not member.alive:
            return
        target = self.targets().get(member_id)
        member.processing = frozenset(target.active) if target else frozenset()
        member.acked = self.assignment.generation

    def catch_up(self, member_id: int) -> None:
        """Every copy the member holds (active, standby, warmup, revoking) becomes fully current."""
        member = self.members[member_id]
        target = self.targets().get(member_id)
        if target is None:
            return
        for task in (*target.active, *target.revoking, *target.standby, *target.warmup):
            member.lags[task] = 0

    def kill(self, member_id: int) -> None:
        """The member's pod dies: it stops processing at once; its local state survives (a PVC)."""
        member = self.members.setdefault(member_id, Member(member_id))
        member.alive = False
        member.processing = frozenset()

    def revive(self, member_id: int) -> None:
        """The member's pod is back and ready; it processes nothing until it applies a target."""
        member = self.members.setdefault(member_id, Member(member_id))
        member.alive = True

    def scale(self, replicas: int) -> None:
        """Change `spec.replicas`; new ids get fresh pods (no state), removed ones keep running."""
        self.app = AppConfig(self.app.partitions, replicas, self.app.rebalance)
        zones = sorted({m.zone for m in self.members.values() if m.zone})
        for i in range(replicas):
            if i not in self.members:
                self.members[i] = Member(i, zone=zones[i % len(zones)] if zones else None)

    def remove_drained(self, removable: tuple[int, ...]) -> None:
        """The operator deletes members it was told are removable (pod and state)."""
        for member_id in removable:
            self.members.pop(member_id, None)

    def double_owned(self) -> dict[int, list[int]]:
        """Tasks that two live members process at this instant."""
        owners: dict[int, list[int]] = {}
        for member in self.members.values():
            if member.alive:
                for task in member.processing:
                    owners.setdefault(task, []).append(member.id)
        return {t: ms for t, ms in owners.items() if len(ms) > 1}

    def settle_round(self) -> Plan:
        """One generation of Kafka's convergence test: plan, everyone applies and catches up."""
        result = self.replan()
        for member_id in sorted(self.members):
            self.apply(member_id)
            self.catch_up(member_id)
        self.remove_drained(result.removable)
        return result

    def converge(self, limit: int) -> int:
        """Generations until a plan made on a fully applied, caught-up state changes nothing.

        Returns `limit + 1` when that does not happen within `limit` generations.
        """
        generations = 0
        applied = False
        while generations <= limit:
            changed = self.settle_round().changed
            if not changed and applied:
                return generations
            generations += changed
            applied = True
        return limit + 1
