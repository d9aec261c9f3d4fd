"""A minimal world of members around the pure engine, for property and convergence tests.

Members here are abstract: they acknowledge targets when told to, report lags the test chooses, and
process exactly the active tasks of the last target they applied. That last point is what lets the
tests check single ownership from the members' side (two members processing one task at the same
instant), not just from the shape of the assignment.

Two faults of real executors are modelled too. A *deaf* member (a dead watch, a batch stuck in user
code) keeps processing what it had but never applies or acknowledges anything again, until its pod is
replaced. And the shared store remembers the highest epoch each task was processed under: a member
given a lower epoch is fenced (processes nothing) and reports the store's epoch, as the data plane does
after the operator's intent was lost (`lose_intent`).
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
    deaf: bool = False
    store_epochs: dict[int, int] = field(default_factory=dict)
    fenced: frozenset[int] = frozenset()
    retiring: bool = False
    upcoming: bool = False
    returning: bool = False
    restore_rows: dict[int, int] = field(default_factory=dict)
    restore_rate: float | None = None
    return_seconds: float | None = None
    stopping: bool = False
    replaced: bool = False


@dataclass
class World:
    """Members, the persisted assignment, the store's epochs and a clock; `replan` runs the real engine
    and, like the operator, deletes the pods of members the plan says timed out."""

    app: AppConfig
    members: dict[int, Member]
    assignment: Assignment
    now: float = 0.0
    history: list[Plan] = field(default_factory=list)
    store: dict[int, int] = field(default_factory=dict)

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
            MemberView(
                m.id,
                m.alive,
                m.zone,
                m.capacity,
                dict(m.lags),
                m.acked,
                dict(m.store_epochs),
                m.fenced if m.alive else frozenset(),
                m.retiring,
                upcoming=m.upcoming,
                returning=m.returning and not m.alive,
                restore_rows=dict(m.restore_rows),
                restore_rate=m.restore_rate,
                return_seconds=None if m.alive else m.return_seconds,
                stopping=m.stopping and not m.alive,
                replaced=m.replaced and not m.alive,
            )
            for m in sorted(self.members.values(), key=lambda m: m.id)
        ]

    def replan(self) -> Plan:
        """Run the engine once, persist its result and delete the pods of timed-out members."""
        result = plan(self.app, self.views(), self.assignment, self.now)
        self.assignment = result.assignment
        self.history.append(result)
        for member_id in result.timed_out:
            self.kill(member_id)
        return result

    def targets(self) -> dict[int, MemberTarget]:
        """Per-member targets of the current assignment."""
        return member_targets(self.assignment)

    def apply(self, member_id: int) -> None:
        """The member applies its current target: stops revoked tasks, starts new ones, acknowledges.

        An active task given an epoch below the store's is fenced: not processed, and reported with the
        store's epoch. A deaf member does nothing at all.
        """
        member = self.members[member_id]
        if not member.alive or member.deaf:
            return
        target = self.targets().get(member_id)
        active = dict(target.active) if target else {}
        fenced = {task for task, epoch in active.items() if epoch < self.store.get(task, 0)}
        for task, epoch in active.items():
            if task not in fenced:
                self.store[task] = epoch
        held = (*active, *target.revoking, *target.standby, *target.warmup) if target else ()
        member.store_epochs.update({task: self.store[task] for task in held if task in self.store})
        member.processing = frozenset(active) - fenced
        member.fenced = frozenset(fenced)
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
        """The member's pod is back and ready (a new process, so not deaf nor retiring: a rolling
        update replaced it); it processes nothing until it applies a target."""
        member = self.members.setdefault(member_id, Member(member_id))
        member.alive = True
        member.deaf = False
        member.fenced = frozenset()
        member.retiring = False
        member.upcoming = False
        member.returning = False
        member.stopping = False
        member.replaced = False

    def lose_intent(self) -> None:
        """The app is deleted and re-created on the same store: every pod and member report is new,
        the assignment starts from nothing, and only the store remembers the epochs."""
        old = self.members
        self.members = {
            i: Member(i, zone=old[i].zone, capacity=old[i].capacity) for i in old if i < self.app.replicas
        }
        self.assignment = Assignment.empty(self.app.partitions)

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
        """One generation of Kafka's convergence test: plan, everyone applies and catches up.

        Pods deleted for a timed-out revocation are replaced at once (healthy, so they acknowledge).
        """
        result = self.replan()
        for member_id in result.timed_out:
            self.revive(member_id)
        for member_id in sorted(self.members):
            self.apply(member_id)
            self.catch_up(member_id)
        self.remove_drained(result.removable)
        return result

    def converge(self, limit: int, tick: float = 0.0) -> int:
        """Generations until a plan made on a fully applied, caught-up state changes nothing.

        The clock moves on by `tick` after every round (time for a revocation to time out). Returns
        `limit + 1` when that does not happen within `limit` generations.
        """
        generations = 0
        applied = False
        while generations <= limit:
            result = self.settle_round()
            self.now += tick
            if not result.changed and not result.timed_out and applied:
                return generations
            generations += result.changed
            applied = True
        return limit + 1
