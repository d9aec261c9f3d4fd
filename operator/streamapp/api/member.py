"""The StreamAppMember resource `<app>-<id>`: one member's target assignment and its progress.

The operator writes `spec` (what the member should run at which generation); the member's executor
writes only `status` (what it has applied and how far behind each copy is). Splitting the two through
the status subresource lets the executor's Role patch its progress without being able to change its
own assignment.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal

from streamapp.api.fields import Rule, prop, wire_name
from streamapp.api.meta import Resource
from streamapp.api.model import Model

TaskRole = Literal["active", "revoking", "standby", "warmup"]
# How a task's ownership on a member began: its pod (or process) restarted, a caught-up copy took it
# over, or it took over restoring while active.
ResumedBy = Literal["restart", "handoff", "cold"]
# Why a copy that had local state of its task restored it in full anyway (executor.state.replica):
# its checkpoint could not be read, the shared history no longer holds what it names, or the changelog
# after it was compacted away (older than stateStore.deltaRetention, or over deltaRetentionSize).
FullRestoreReason = Literal["checkpoint-unusable", "history-changed", "delta-expired"]
FULL_RESTORE_REASONS: tuple[FullRestoreReason, ...] = typing.get_args(FullRestoreReason)

MAX_EPOCH = 2**53
"""The highest epoch a report may name (a double holds every integer up to it exactly). The operator
hands out the store's epoch plus one: an epoch near int64's limit in a report would make every member
write fail (422) from then on, so a report above this is not believed (`controller.observe`)."""


def acknowledged_generation(target_generation: int, observed_generation: int | None) -> int:
    """The generation a member's executor acknowledged, as far as it can have: never above the
    target it was given (an executor cannot have applied a target the operator has not written, so a
    higher report acknowledges revocations it never performed); pure."""
    return max(0, min(observed_generation or 0, target_generation))


# `kubectl get sam -o wide` stays one line per member: longer task sets end in "…(N tasks)".
MAX_TASK_RANGES_CHARS = 48


def task_ranges(tasks: Iterable[int]) -> str:
    """A task set as compact ranges for printer columns: {0, 1, 2, 3, 8} → "0-3,8"; pure.

    The lists in the spec stay the executor's contract; this is only what a person reads. A set whose
    ranges do not fit in MAX_TASK_RANGES_CHARS is cut at a range boundary and says how many tasks it has.
    """
    ordered = sorted(set(tasks))
    runs: list[list[int]] = []
    for task in ordered:
        if runs and task == runs[-1][1] + 1:
            runs[-1][1] = task
        else:
            runs.append([task, task])
    parts = [str(first) if first == last else f"{first}-{last}" for first, last in runs]
    text = ",".join(parts)
    if len(text) <= MAX_TASK_RANGES_CHARS:
        return text
    suffix = f",…({len(ordered)} tasks)"
    cut = text[: MAX_TASK_RANGES_CHARS - len(suffix) + 1]  # one more: a comma there keeps the whole range
    return cut[: cut.rfind(",")] + suffix


@dataclass(frozen=True, kw_only=True)
class ActiveTask(Model):
    """A task the member must process, with the epoch that fences older owners."""

    task: int = field(metadata=prop("Task (partition) number."))
    epoch: int = field(metadata=prop("Fencing token of this ownership; commits with an older epoch lose."))


@dataclass(frozen=True, kw_only=True)
class RevokingTask(Model):
    """A task the member must let go of: finish the batch, commit, stop, then acknowledge."""

    task: int = field(metadata=prop("Task (partition) number."))
    epoch: int = field(metadata=prop("Epoch of the ownership being revoked."))
    since: str | None = field(
        default=None, metadata=prop("When the revocation was first asked for.", format="date-time")
    )


@dataclass(frozen=True, kw_only=True)
class StreamAppMemberSpec(Model):
    """The member's target assignment, written by the operator at assignment generation `generation`."""

    PATH: ClassVar[str] = "spec"

    app: str = field(metadata=prop("Name of the StreamApp the member belongs to."))
    member_id: int = field(metadata=prop("Static member id; the pod is <app>-<id>."))
    generation: int = field(default=0, metadata=prop("Assignment generation that last changed this target."))
    active: tuple[ActiveTask, ...] = field(
        default=(), metadata=prop("Tasks to process.", list_map_keys=("task",), atomic=True)
    )
    revoking: tuple[RevokingTask, ...] = field(
        default=(), metadata=prop("Tasks to let go of.", list_map_keys=("task",), atomic=True)
    )
    standby: tuple[int, ...] = field(default=(), metadata=prop("Tasks to keep hot copies of."))
    warmup: tuple[int, ...] = field(default=(), metadata=prop("Tasks to warm up before a handoff."))
    active_tasks: str | None = field(
        default=None, metadata=prop("The active tasks as ranges, e.g. 0-3,8 (for kubectl; see active).")
    )
    revoking_tasks: str | None = field(
        default=None, metadata=prop("The revoking tasks as ranges (for kubectl; see revoking).")
    )
    standby_tasks: str | None = field(
        default=None, metadata=prop("The standby tasks as ranges (for kubectl; see standby).")
    )
    warmup_tasks: str | None = field(
        default=None, metadata=prop("The warmup tasks as ranges (for kubectl; see warmup).")
    )
    retiring: bool = field(
        default=False,
        metadata=prop(
            "The member is leaving (a rolling update's handoff, or its pod is being deleted by someone "
            "else: an eviction, a node drain): on SIGTERM its executor keeps following this target until "
            "it owns nothing, within the pod's grace period, instead of stopping at once."
        ),
    )
    lag_thresholds: tuple[int, ...] = field(
        default=(),
        metadata=prop(
            "Copy lags above 0 the operator acts on (the app's rebalance.handoffLag and "
            "acceptableRecoveryLag): the executor reports a copy's lag reaching one of them, or 0, at "
            "once, not with its next progress report."
        ),
    )

    @staticmethod
    def of(
        app: str,
        member_id: int,
        generation: int,
        active: Mapping[int, int],
        revoking: Mapping[int, int],
        standby: Iterable[int],
        warmup: Iterable[int],
        retiring: bool = False,
        lag_thresholds: Iterable[int] = (),
    ) -> StreamAppMemberSpec:
        """The spec of a target (tasks → epochs for owned tasks): lists in task order, so the same
        target always serializes the same way, and each set again as ranges for kubectl."""
        return StreamAppMemberSpec(
            app=app,
            member_id=member_id,
            generation=generation,
            active=tuple(ActiveTask(task=t, epoch=e) for t, e in sorted(active.items())),
            revoking=tuple(RevokingTask(task=t, epoch=e) for t, e in sorted(revoking.items())),
            standby=tuple(sorted(standby)),
            warmup=tuple(sorted(warmup)),
            active_tasks=task_ranges(active),
            revoking_tasks=task_ranges(revoking),
            standby_tasks=task_ranges(standby),
            warmup_tasks=task_ranges(warmup),
            retiring=retiring,
            lag_thresholds=tuple(sorted(set(lag_thresholds) - {0})),
        )

    def caught_up_at(self) -> tuple[int, ...]:
        """The copy lags the operator acts on: 0 (fully caught up) and `lag_thresholds`."""
        return (0, *self.lag_thresholds)

    def active_epochs(self) -> dict[int, int]:
        """Tasks to process → their epochs."""
        return {t.task: t.epoch for t in self.active}

    def revoking_epochs(self) -> dict[int, int]:
        """Tasks to let go of → the epochs of the ownership being revoked."""
        return {t.task: t.epoch for t in self.revoking}

    def held(self) -> frozenset[tuple[int, int]]:
        """(task, epoch) of every ownership the member may still process under: active or revoking."""
        return frozenset(
            {(t.task, t.epoch) for t in self.active} | {(t.task, t.epoch) for t in self.revoking}
        )

    def same_target(self, other: StreamAppMemberSpec) -> bool:
        """Whether both say the same thing, generation aside (the generation is when it last changed)."""
        return replace(self, generation=0) == replace(other, generation=0)


@dataclass(frozen=True, kw_only=True)
class TaskReport(Model):
    """How far one of the member's copies has got."""

    task: int = field(metadata=prop("Task (partition) number."))
    role: TaskRole = field(metadata=prop("The role the copy runs in: active, revoking, standby or warmup."))
    epoch: int | None = field(
        default=None, metadata=prop("Epoch the copy runs under (active and revoking copies).")
    )
    applied_seq: int | None = field(
        default=None, metadata=prop("Last commit sequence applied to the local state.")
    )
    applied_offset: int | None = field(
        default=None, metadata=prop("Input offset up to which the local state is current.")
    )
    lag: int | None = field(
        default=None, metadata=prop("Changelog records still to apply; 0 for the active copy.")
    )
    input_lag: int | None = field(
        default=None,
        metadata=prop(
            "Active copies only: records in the source after the committed offset, still to process "
            "(summed into the StreamApp's status.inputLag for autoscalers)."
        ),
    )
    store_epoch: int | None = field(
        default=None,
        metadata=prop(
            "Highest epoch the shared state store has seen for the task; the operator hands out no "
            "epoch at or below it."
        ),
    )
    fenced_by: int | None = field(
        default=None,
        metadata=prop(
            "Active copies only: the store's higher epoch that fences this copy's epoch (it processes "
            "nothing until the operator gives it a new epoch)."
        ),
    )
    restored_blocking: int | None = field(
        default=None,
        metadata=prop(
            "Rows this copy restored from the shared store while active, before it could process (what "
            "a restart or a move cost in downtime); a restart that resumed from local state restores "
            "only what was committed since its checkpoint."
        ),
    )
    restored_background: int | None = field(
        default=None,
        metadata=prop("Rows this copy restored from the shared store as a standby or warmup (no downtime)."),
    )
    resumed_after: float | None = field(
        default=None,
        metadata=prop(
            "Seconds the task stood still when its ownership on this member began: from the commit of "
            "its previous batch (by whichever owner) to the commit of its first batch here, by the commit "
            "manifests' times; unset for a task with no earlier batch. Kept while the task stays here."
        ),
    )
    restore_rows: int | None = field(
        default=None,
        metadata=prop(
            "Active copies only: rows a copy with no local state would restore for this task now (the "
            "rows of the newest snapshot's runs plus those of the segments after it); over a member's restore "
            "rate, what a restore of the task elsewhere is estimated to take if this member is lost.",
        ),
    )
    resumed_by: ResumedBy | None = field(
        default=None,
        metadata=prop(
            "How that ownership began: restart (the previous batch was this member's, from an earlier "
            "process: the operator's measured restart time), handoff (another owner's, taken over by a "
            "warm copy kept here, a warmup or standby: the measured handoff time) or cold."
        ),
    )
    full_restores: int | None = field(
        default=None,
        metadata=prop(
            "Times this copy had local state of the task but restored it in full from the shared store "
            "anyway, since the task came to this member; the reason of the last is fullRestoreReason."
        ),
    )
    full_restore_reason: FullRestoreReason | None = field(
        default=None,
        metadata=prop(
            "Why the last full restore happened: checkpoint-unusable (the local checkpoint was torn, of "
            "another store kind, or its store would not open), history-changed (the shared store no "
            "longer holds the commits it names: a wiped or different store) or delta-expired (the "
            "changelog after it was compacted: older than stateStore.deltaRetention or over "
            "deltaRetentionSize)."
        ),
    )


@dataclass(frozen=True, kw_only=True)
class StreamAppMemberStatus(Model):
    """The member's progress, written by its executor."""

    PATH: ClassVar[str] = "status"

    observed_generation: int | None = field(
        default=None,
        metadata=prop(
            "spec.generation the executor has applied; for a revoking task this is the acknowledgement. "
            "Never above spec.generation (refused by the API server)."
        ),
    )
    pod_uid: str | None = field(
        default=None,
        metadata=prop(
            "UID of the pod that made this report; reports from an earlier pod are stale.", wire="podUID"
        ),
    )
    started_at: str | None = field(
        default=None,
        metadata=prop(
            "When the executor process that made this report started. A container restarted in place "
            "keeps its pod's UID; a report made before its executor container's last start is stale.",
            format="date-time",
        ),
    )
    reported_at: str | None = field(
        default=None, metadata=prop("When the report was written.", format="date-time")
    )
    tasks: tuple[TaskReport, ...] = field(
        default=(),
        metadata=prop("One report per copy (task and role).", list_map_keys=("task", "role"), atomic=True),
    )
    restore_rate: float | None = field(
        default=None,
        metadata=prop(
            "Rows a second this executor restored state at from the shared store, over every restore "
            "its copies made (unset until enough rows were restored to measure): the other side of a "
            "lost task's restore estimate.",
            minimum=0,
        ),
    )
    setup_error: str | None = field(
        default=None,
        metadata=prop(
            "Why the executor cannot start with this app's spec (for example a Kafka topic whose "
            "partition count differs from spec.partitions); it exits and retries until this is fixed. "
            "The operator shows it in the StreamApp's Degraded condition.",
            max_length=4096,
        ),
    )

    def merge_patch(self) -> dict[str, Any]:
        """This status as the body of a JSON merge patch of the status subresource: fields left unset
        are written as null, which removes them, so a started executor's first report clears the
        setup error an earlier start left."""
        wire = self.to_dict()
        return {"status": {wire_name(f): wire.get(wire_name(f)) for f in fields(self)}}


@dataclass(frozen=True, kw_only=True)
class StreamAppMember(Resource[StreamAppMemberSpec, StreamAppMemberStatus]):
    """One member of a StreamApp: target assignment (spec) and progress (status)."""

    KIND: ClassVar[str] = "StreamAppMember"
    PLURAL: ClassVar[str] = "streamappmembers"
    SINGULAR: ClassVar[str] = "streamappmember"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("sam",)

    SPEC: ClassVar[type[Model]] = StreamAppMemberSpec
    STATUS: ClassVar[type[Model]] = StreamAppMemberStatus

    # The executor's acknowledgement is bounded by the target it was given. A transition rule: a value
    # the object already holds (stored before this rule existed) does not make the operator's own spec
    # writes fail; those only raise spec.generation, so they never trip it otherwise.
    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "!has(self.status) || !has(self.status.observedGeneration)"
            " || self.status.observedGeneration <= (has(self.spec.generation) ? self.spec.generation : 0)"
            " || (has(oldSelf.status) && has(oldSelf.status.observedGeneration)"
            " && oldSelf.status.observedGeneration == self.status.observedGeneration)",
            "status.observedGeneration may not exceed spec.generation: an executor acknowledges only "
            "a target the operator gave it",
            field_path=".status.observedGeneration",
        ),
    )

    status: StreamAppMemberStatus = field(default_factory=StreamAppMemberStatus)

    @staticmethod
    def name_for(app: str, member_id: int) -> str:
        """`<app>-<id>`, the same name as the member's pod."""
        return f"{app}-{member_id}"
