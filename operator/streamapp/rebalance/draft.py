"""A mutable working copy of an assignment, used inside one planning step only.

Protocols edit the draft through a few verbs (assign, revoke, release, set copies) that also record
events, so the rules of a move — a new owner bumps the epoch above every epoch the store has seen, a
revocation is stamped with the generation and the time that asked for it — are written once. `freeze`
turns the draft back into an immutable `Assignment`, bumping the generation only when some member's
target really changed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from streamapp.rebalance.model import Assignment, Event, EventKind, Flap, Reservation, TaskAssignment


class Draft:
    """The assignment being planned; `generation` is the one it will have if anything changes.

    `floor` holds, per task, the highest epoch any member reported seeing in the store: every epoch the
    draft hands out is above it. A revocation persisted without its time (written before times were
    kept) counts from `now`, so its deadline is never shorter than the timeout.
    """

    def __init__(self, previous: Assignment, partitions: int, now: float, floor: Sequence[int]) -> None:
        if previous.tasks and len(previous.tasks) != partitions:
            raise ValueError(
                f"partitions changed from {len(previous.tasks)} to {partitions}; partitions are immutable"
            )
        base = previous if previous.tasks else Assignment.empty(partitions)
        self.previous = base
        self.generation = base.generation + 1
        self.active: list[int | None] = [t.active for t in base.tasks]
        self.epoch: list[int] = [t.epoch for t in base.tasks]
        self.revoking: list[int | None] = [t.revoking_since for t in base.tasks]
        self.revoking_at: list[float | None] = [
            now if t.revoking_since is not None and t.revoking_at is None else t.revoking_at
            for t in base.tasks
        ]
        self.now = now
        self.floor: list[int] = list(floor)
        self.standbys: list[tuple[int, ...]] = [t.standbys for t in base.tasks]
        self.warmups: list[tuple[int, ...]] = [t.warmups for t in base.tasks]
        self.reservations: dict[int, float] = {r.member: r.deadline for r in base.reservations}
        self.planned: set[int] = {r.member for r in base.reservations if r.planned}
        self.membership: tuple[int, ...] = base.membership
        self.next_probe_at: float | None = base.next_probe_at
        self.flaps: tuple[Flap, ...] = base.flaps
        self.events: list[Event] = []
        self._grouped: dict[tuple[EventKind, int | None, str], list[int]] = defaultdict(list)

    @property
    def partitions(self) -> int:
        """Number of tasks."""
        return len(self.active)

    def owned_by(self, member: int) -> list[int]:
        """Tasks whose active owner is `member` (revoking or not)."""
        return [t for t, a in enumerate(self.active) if a == member]

    def owner(self, task: int) -> int | None:
        """The task's active owner unless it is already being revoked."""
        return self.active[task] if self.revoking[task] is None else None

    def assign(self, task: int, member: int, kind: EventKind = EventKind.TASKS_ASSIGNED) -> None:
        """Make `member` the active owner of an unowned task, fencing every earlier owner."""
        if self.active[task] is not None:
            raise AssertionError(f"task {task} is still owned by {self.active[task]}")
        self.active[task] = member
        self.epoch[task] = max(self.epoch[task], self.floor[task]) + 1
        self.revoking[task] = None
        self.revoking_at[task] = None
        self.standbys[task] = tuple(m for m in self.standbys[task] if m != member)
        self.warmups[task] = tuple(m for m in self.warmups[task] if m != member)
        self.note(kind, member, task)

    def revoke(self, task: int, successor: int | None = None) -> None:
        """Ask the owner to let go; the task may go elsewhere only after it acknowledges.

        A named successor is recorded as the task's warmup (moved there from the standbys when it
        was one), so the handoff's destination is part of the persisted intent and the next steps
        keep to it instead of re-deciding.
        """
        owner = self.active[task]
        if owner is None or self.revoking[task] is not None:
            return
        self.revoking[task] = self.generation
        self.revoking_at[task] = self.now
        self.note(EventKind.TASKS_REVOKED, owner, task)
        if successor is not None:
            self.standbys[task] = tuple(m for m in self.standbys[task] if m != successor)
            self.warmups[task] = (successor,)

    def release(self, task: int) -> None:
        """Forget the owner: it acknowledged the revocation, or its pod is gone."""
        self.active[task] = None
        self.revoking[task] = None
        self.revoking_at[task] = None

    def refence(self, task: int) -> None:
        """Give the owner a new epoch above the store's, in place: the store holds a higher epoch than
        the one it runs under (the intent that knew it was lost), so it is fenced and processes nothing."""
        self.epoch[task] = max(self.epoch[task], self.floor[task]) + 1
        self.note(EventKind.TASK_FENCED, self.active[task], task, "the store holds a higher epoch")

    def add_warmup(self, task: int, member: int) -> None:
        """Start warming `task` on `member` in the background."""
        if member not in self.warmups[task]:
            self.warmups[task] = tuple(sorted((*self.warmups[task], member)))
            self.note(EventKind.WARMUP_STARTED, member, task)

    def drop_warmup(self, task: int, member: int) -> None:
        """Stop a warmup that is no longer wanted."""
        if member in self.warmups[task]:
            self.warmups[task] = tuple(m for m in self.warmups[task] if m != member)
            self.note(EventKind.WARMUP_CANCELLED, member, task)

    def note(self, kind: EventKind, member: int | None, task: int, detail: str = "") -> None:
        """Record that `kind` happened to `task` on `member` (grouped when frozen)."""
        self._grouped[(kind, member, detail)].append(task)

    def event(self, event: Event) -> None:
        """Record an event that is already complete (e.g. a member lost with its deadline)."""
        self.events.append(event)

    def all_events(self) -> tuple[Event, ...]:
        """Complete events first, then the per-task notes grouped by kind and member."""
        grouped = [
            Event(kind, member, tuple(sorted(set(tasks))), detail)
            for (kind, member, detail), tasks in sorted(
                self._grouped.items(), key=lambda kv: (kv[0][0].value, _sort_member(kv[0][1]), kv[0][2])
            )
        ]
        return (*self.events, *grouped)

    def freeze(self) -> tuple[Assignment, bool]:
        """The immutable result and whether the generation advanced."""
        tasks = tuple(
            TaskAssignment(
                active=self.active[t],
                epoch=self.epoch[t],
                revoking_since=self.revoking[t],
                standbys=_sorted(self.standbys[t]),
                warmups=_sorted(self.warmups[t]),
                revoking_at=self.revoking_at[t],
            )
            for t in range(self.partitions)
        )
        changed = _targets(tasks) != _targets(self.previous.tasks)
        return (
            replace(
                self.previous,
                generation=self.generation if changed else self.previous.generation,
                tasks=tasks,
                reservations=tuple(
                    Reservation(m, d, m in self.planned) for m, d in sorted(self.reservations.items())
                ),
                membership=self.membership,
                next_probe_at=self.next_probe_at,
                flaps=self.flaps,
            ),
            changed,
        )


def _targets(tasks: tuple[TaskAssignment, ...]) -> list[tuple[object, ...]]:
    """The tasks without revocation times: re-stamping a time changes no member's target.

    Plain tuples of the fields, not copies of the tasks: this runs on every plan, over every task.
    """
    return [(t.active, t.epoch, t.revoking_since, t.standbys, t.warmups) for t in tasks]


def _sorted(members: tuple[int, ...]) -> tuple[int, ...]:
    """The copies in id order (most tasks have none or one: nothing to sort)."""
    return members if len(members) < 2 else tuple(sorted(members))


def _sort_member(member: int | None) -> int:
    return -1 if member is None else member
