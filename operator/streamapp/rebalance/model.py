"""The engine's vocabulary as immutable values: what it observes, what it persists, what it decides.

Everything here is plain data so the same values travel through the operator (persisted in status and
member specs), the simulator and the property tests. Tuples keep the values hashable and their order
deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(frozen=True)
class MemberView:
    """One member as the shell observed it.

    `alive` means its pod exists and is ready (liveness comes from the kubelet, not from heartbeats).
    `lags` holds, for every task the member has local state of, how many changelog records it still has
    to apply; a task missing from it means no state at all. Lags must come from a report made since the
    pod became ready: a report from before a restart says nothing about what state survived.
    `acked_generation` is the newest generation
    whose target the member has applied — it is what confirms a revocation.

    `store_epochs` holds, per task, the highest epoch the member has seen in the shared state store.
    Unlike lags these are facts about the store, not about the pod, so any report counts, even from an
    earlier pod: the engine never hands out an epoch at or below one of them (after a lost intent the
    store remembers epochs the assignment forgot). `fenced` are the tasks the member's current pod runs
    as active but cannot process because the store holds a higher epoch than the one it was given.

    `retiring` marks a member whose pod is about to be replaced by a rolling update: it is treated
    like a draining member (keeps what it owns until caught-up successors take it, gets nothing new),
    so its pod can be deleted once it owns no active task, without a task going down. `upcoming`
    marks a live member a rolling update will hand off next: it keeps and gets tasks as usual, but
    copies of its tasks warm ahead on the members that will take them (`upcoming`).

    `returning` marks a member that is not alive but whose pod is visibly on its way back: its
    container restarting in place, or a replacement pod scheduled and starting. A lost member that is
    returning is expected back within its reservation, so its held tasks are not pre-warmed elsewhere
    and its standby copies are not replaced before the deadline (copies made for a member that comes
    back are thrown away). The shell sets it only when Kubernetes shows the start under way, never for
    a pod stuck unscheduled, failing to pull its image or crash-looping.

    Three estimates let the engine weigh waiting for a lost member against restoring its tasks
    elsewhere (`recovery`). `restore_rows` holds, per task, how many rows a copy with no local state
    would restore now (the member's last report as the task's owner; like `store_epochs` a fact about
    the store, so any report counts). `restore_rate` is how many rows a second this member restores,
    all its restores together (they share it), as it measured; None until measured. `return_seconds`, for a member that is not
    alive, is how long after its loss its tasks are expected to process again if they wait for it (the
    shell's estimate from measured restarts and pod starts; for a member that is not `returning`, the
    soonest it could be back); None when unknown.

    `stopping` marks a member that is not alive but whose pod still exists, being deleted: its process
    may still run until the grace period ends, so a task revoked from it is released only once it
    acknowledged or its pod is gone (`reservations.settle`).

    `replaced` marks a member whose pod the operator itself deleted to restart it in place (a rolling
    update): its loss is planned, so it does not count toward flapping (`flapping`).

    `reported` is False for a member whose current pod has not reported yet: its `lags` are empty
    because nothing is known of its local state, not because it has none, so no warmup is started on
    it until it has (a member back from a restart would otherwise be given tasks to restore in full
    when its claim holds the state of others).
    """

    id: int
    alive: bool = True
    zone: str | None = None
    capacity: float = 1.0
    lags: Mapping[int, int] = field(default_factory=dict)
    acked_generation: int = 0
    store_epochs: Mapping[int, int] = field(default_factory=dict)
    fenced: frozenset[int] = frozenset()
    retiring: bool = False
    upcoming: bool = False
    returning: bool = False
    restore_rows: Mapping[int, int] = field(default_factory=dict)
    restore_rate: float | None = None
    return_seconds: float | None = None
    reported: bool = True
    stopping: bool = False
    replaced: bool = False


@dataclass(frozen=True, slots=True)
class TaskAssignment:
    """Who does what for one task.

    `active` is the single owner; while `revoking_since` is set the owner has been asked (at that
    generation, at time `revoking_at`) to let go and keeps the task until it acknowledges or
    `revocationTimeout` after `revoking_at` passes. `epoch` fences stale owners and is bumped on every
    change of active owner, and in place when the store turns out to hold a higher one.
    """

    active: int | None = None
    epoch: int = 0
    revoking_since: int | None = None
    standbys: tuple[int, ...] = ()
    warmups: tuple[int, ...] = ()
    revoking_at: float | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """Tasks of a lost member are held for it until `deadline` (delayed reassignment, KIP-415).
    `planned`: the loss is the operator's own restart of the member's pod (`MemberView.replaced`), so
    it is no flap and its tasks are not insured against a late return (`recovery`)."""

    member: int
    deadline: float
    planned: bool = False


@dataclass(frozen=True, slots=True)
class Flap:
    """A member lost recently (`flapping`): when (`losses`, those within `flapWindow`), whether it is
    damped — lost twice within the window, so not trusted to return and given no tasks — and since when
    its pod has been ready again (`up_since`; None while it is not)."""

    member: int
    losses: tuple[float, ...] = ()
    damped: bool = False
    up_since: float | None = None


@dataclass(frozen=True)
class Assignment:
    """The persisted intent of an app: current targets plus everything an in-flight handoff needs.

    `membership` is the set of live members the last full assignment was computed for (the eager
    protocol compares against it); `next_probe_at` is when caught-up warmups are re-checked even
    without a fresh report; `flaps` the members lost recently, by the state-aware protocol's account.
    """

    generation: int = 0
    tasks: tuple[TaskAssignment, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    membership: tuple[int, ...] = ()
    next_probe_at: float | None = None
    flaps: tuple[Flap, ...] = ()

    @staticmethod
    def empty(partitions: int) -> Assignment:
        """The assignment of an app that has never been planned: every task unassigned."""
        return Assignment(tasks=tuple(TaskAssignment() for _ in range(partitions)))

    def in_flight(self) -> bool:
        """Whether a handoff is under way (revocations awaiting acks or warmups catching up)."""
        return any(t.revoking_since is not None or t.warmups for t in self.tasks)

    def reserved_for(self, member: int) -> Reservation | None:
        """The reservation held for `member`, if any."""
        return next((r for r in self.reservations if r.member == member), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for persisting intent (status, member specs, simulator traces)."""
        return {
            "generation": self.generation,
            "tasks": [
                {
                    "active": t.active,
                    "epoch": t.epoch,
                    "revokingSince": t.revoking_since,
                    "standbys": list(t.standbys),
                    "warmups": list(t.warmups),
                    "revokingAt": t.revoking_at,
                }
                for t in self.tasks
            ],
            "reservations": [reservation_to_dict(r) for r in self.reservations],
            "membership": list(self.membership),
            "nextProbeAt": self.next_probe_at,
            "flaps": [flap_to_dict(f) for f in self.flaps],
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Assignment:
        """Inverse of `to_dict`; a missing key reads as null or empty, since stores may drop nulls."""
        return Assignment(
            generation=int(data.get("generation") or 0),
            tasks=tuple(
                TaskAssignment(
                    active=t.get("active"),
                    epoch=int(t.get("epoch") or 0),
                    revoking_since=t.get("revokingSince"),
                    standbys=tuple(t.get("standbys") or ()),
                    warmups=tuple(t.get("warmups") or ()),
                    revoking_at=None if t.get("revokingAt") is None else float(t["revokingAt"]),
                )
                for t in data.get("tasks") or ()
            ),
            reservations=tuple(reservation_from_dict(r) for r in data.get("reservations") or ()),
            membership=tuple(data.get("membership") or ()),
            next_probe_at=data.get("nextProbeAt"),
            flaps=tuple(flap_from_dict(f) for f in data.get("flaps") or ()),
        )


def reservation_to_dict(reservation: Reservation) -> dict[str, Any]:
    """A reservation, JSON-ready (`planned` only when set, as intents before it was kept)."""
    found: dict[str, Any] = {"member": reservation.member, "deadline": reservation.deadline}
    if reservation.planned:
        found["planned"] = True
    return found


def reservation_from_dict(data: Mapping[str, Any]) -> Reservation:
    """Inverse of `reservation_to_dict`."""
    return Reservation(int(data["member"]), float(data["deadline"]), bool(data.get("planned")))


def flap_to_dict(flap: Flap) -> dict[str, Any]:
    """A flap record, JSON-ready (the intent's `flaps`)."""
    return {
        "member": flap.member,
        "losses": list(flap.losses),
        "damped": flap.damped,
        "upSince": flap.up_since,
    }


def flap_from_dict(data: Mapping[str, Any]) -> Flap:
    """Inverse of `flap_to_dict`; a missing key reads as empty."""
    up = data.get("upSince")
    return Flap(
        int(data["member"]),
        tuple(float(t) for t in data.get("losses") or ()),
        bool(data.get("damped")),
        None if up is None else float(up),
    )


class EventKind(StrEnum):
    """What happened in one planning step; the operator turns these into Kubernetes Events."""

    MEMBER_LOST = "MemberLost"
    MEMBER_RETURNED = "MemberReturned"
    RESERVATION_EXPIRED = "ReservationExpired"
    FAILED_OVER = "FailedOverToStandby"
    RESTORED_ELSEWHERE = "RestoredElsewhere"
    TASKS_REVOKED = "TasksRevoked"
    TASKS_ASSIGNED = "TasksAssigned"
    WARMUP_STARTED = "WarmupStarted"
    WARMUP_PROMOTED = "WarmupPromoted"
    WARMUP_CANCELLED = "WarmupCancelled"
    REBALANCE_COMPLETED = "RebalanceCompleted"
    REVOCATION_TIMED_OUT = "RevocationTimedOut"
    TASK_FENCED = "TaskFenced"
    MEMBER_FLAPPING = "MemberFlapping"
    MEMBER_STEADY = "MemberSteady"


# Kinds that mean something went wrong (Warning Events): a person may have to look.
WARNING_KINDS = frozenset(
    {EventKind.MEMBER_LOST, EventKind.REVOCATION_TIMED_OUT, EventKind.TASK_FENCED, EventKind.MEMBER_FLAPPING}
)


@dataclass(frozen=True)
class Event:
    """One fact about a planning step, grouped per member so a busy step stays readable."""

    kind: EventKind
    member: int | None = None
    tasks: tuple[int, ...] = ()
    detail: str = ""

    def describe(self) -> str:
        """A one-line human-readable form, e.g. `WarmupStarted member 3: tasks 4,7`."""
        who = f" member {self.member}" if self.member is not None else ""
        what = f": tasks {_task_list(self.tasks)}" if self.tasks else ""
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.kind.value}{who}{what}{extra}"

    @property
    def warning(self) -> bool:
        """Whether the event reports a fault rather than normal progress."""
        return self.kind in WARNING_KINDS


@dataclass(frozen=True)
class LostMember:
    """What the engine weighed for one lost member's held tasks, and what it chose (`recovery`).

    `restoring` are the held tasks warming elsewhere now, the rest wait for the member. `back_at` is
    when the member is expected to process again (None: unknown — silent, not measured, or overdue),
    `restore_seconds` the estimated restore of its slowest held task where it would go (None: not
    measured), over `restore_rows` rows in all at `restore_rate` rows a second. `reason` says it in
    a phrase with the figures, for Events and status.
    """

    member: int
    lost_at: float
    held: tuple[int, ...]
    restoring: tuple[int, ...]
    back_at: float | None
    restore_seconds: float | None
    restore_rows: int | None
    restore_rate: float | None
    reason: str

    @property
    def choice(self) -> str:
        """`Restore` when any held task is restored elsewhere, `Wait` when all wait for the member."""
        return "Restore" if self.restoring else "Wait"


@dataclass(frozen=True)
class Plan:
    """The engine's answer: the new intent, when to look again, what happened and why.

    `timed_out` are members that did not acknowledge a revocation within `revocationTimeout`: the
    shell must delete their pods (and replace them), after which their tasks follow the lost-member
    path. `fenced` are tasks whose active owner cannot process because the store holds a higher epoch:
    either found now (and given a new epoch above the store's) or still reported by the owner, which
    has not applied its new epoch yet. `lost` says, per lost member holding tasks, whether they wait
    for it or are restored elsewhere, and on which figures.
    """

    assignment: Assignment
    changed: bool
    wake_at: float | None
    events: tuple[Event, ...]
    removable: tuple[int, ...]
    reason: str
    timed_out: tuple[int, ...] = ()
    fenced: tuple[int, ...] = ()
    lost: tuple[LostMember, ...] = ()


@dataclass(frozen=True)
class MemberTarget:
    """What one member must do, as written to its StreamAppMember spec."""

    active: Mapping[int, int]
    revoking: Mapping[int, int]
    standby: tuple[int, ...]
    warmup: tuple[int, ...]

    def is_empty(self) -> bool:
        """Whether the member holds nothing at all (a drained member may then be removed)."""
        return not (self.active or self.revoking or self.standby or self.warmup)


def member_targets(assignment: Assignment) -> dict[int, MemberTarget]:
    """Split an assignment into per-member targets (tasks → epochs for owned tasks)."""
    active: dict[int, dict[int, int]] = {}
    revoking: dict[int, dict[int, int]] = {}
    standby: dict[int, list[int]] = {}
    warmup: dict[int, list[int]] = {}
    for task, t in enumerate(assignment.tasks):
        if t.active is not None:
            bucket = revoking if t.revoking_since is not None else active
            bucket.setdefault(t.active, {})[task] = t.epoch
        for m in t.standbys:
            standby.setdefault(m, []).append(task)
        for m in t.warmups:
            warmup.setdefault(m, []).append(task)
    members = sorted(set(active) | set(revoking) | set(standby) | set(warmup))
    return {
        m: MemberTarget(
            active=active.get(m, {}),
            revoking=revoking.get(m, {}),
            standby=tuple(standby.get(m, ())),
            warmup=tuple(warmup.get(m, ())),
        )
        for m in members
    }


def _task_list(tasks: tuple[int, ...], limit: int = 12) -> str:
    shown = ",".join(str(t) for t in tasks[:limit])
    return shown + (f",… ({len(tasks)} in all)" if len(tasks) > limit else "")
