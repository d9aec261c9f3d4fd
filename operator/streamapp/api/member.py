"""The StreamAppMember resource `<app>-<id>`: one member's target assignment and its progress.

The operator writes `spec` (what the member should run at which generation); the member's executor
writes only `status` (what it has applied and how far behind each copy is). Splitting the two through
the status subresource lets the executor's Role patch its progress without being able to change its
own assignment.

Both share one object, and etcd refuses one over 1.5 MiB; a member may hold all 100,000 tasks of an
app. So each side writes lists and rows while they fit in 512 KiB — byte for byte the previous
version's form — and a packed field beyond (`spec.packed`: `pack_tasks`; `status.packed`:
`pack_report`), which the models read back into the same lists: whichever form was written, readers
see one model (docs/design.md, "One member of 100,000 tasks").
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import typing
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, Literal

from streamapp.api.fields import Rule, ValidationError, prop, wire_name
from streamapp.api.meta import Resource
from streamapp.api.wiremodel import Model

TaskRole = Literal["active", "revoking", "standby", "warmup"]
# How a task's ownership on a member began: its pod (or process) restarted, a caught-up copy took it
# over, or it took over restoring while active.
ResumedBy = Literal["restart", "handoff", "cold"]
# Why a copy that had local state of its task restored it in full anyway (executor.state.replica):
# its checkpoint could not be read, the shared history no longer holds what it names, or the changelog
# after it was compacted away (older than stateStore.deltaRetention, or over deltaRetentionSize).
FullRestoreReason = Literal["checkpoint-unusable", "history-changed", "delta-expired", "delta-larger"]
FULL_RESTORE_REASONS: tuple[FullRestoreReason, ...] = typing.get_args(FullRestoreReason)

MAX_EPOCH = 2**53
"""The highest epoch a report may name (a double holds every integer up to it exactly). The operator
hands out the store's epoch plus one: an epoch near int64's limit in a report would make every member
write fail (422) from then on, so a report above this is not believed (`controller.observe`)."""

LIST_FORM_BYTES = 524_288
"""The largest member target written as lists (`StreamAppMemberSpec.wire`), in bytes of JSON (~19,000
owned tasks): what every executor version reads, and byte for byte what the previous operator wrote
for any member whose executor could report at all (its report, ~170 bytes a copy, passed etcd's
limit near 8,000 copies). A larger target is written packed. With the report's `REPORT_LIST_BYTES`,
spec and status together stay under etcd's 1.5 MiB."""

MAX_PACKED_CHARS = 786_432
"""The largest packed target (`spec.packed`), in characters: 100,000 tasks on one member take a few kB
when planned, ~0.5 MB when every epoch is a different random number below 2^20
(`tests/api/test_member_packing.py`), ~1.1 MB with random epochs near `MAX_EPOCH` (only reports of
store epochs made up task by task get there). A target that would not fit is refused before any
member is written (`TargetTooLarge`: the app's Degraded condition and a Warning Event). With the
report's `REPORT_LIST_BYTES`, spec and status together stay under etcd's 1.5 MiB."""

REPORT_LIST_BYTES = 524_288
"""The largest member report written as rows (`StreamAppMemberStatus.merge_patch`), in bytes of JSON
(~3,000 copies at ~170 bytes each): every operator version reads it. A larger report is written
packed, and packed it is bounded by this too (`pack_report`): with the target's `MAX_PACKED_CHARS`,
spec and status together stay under etcd's 1.5 MiB."""

BATCH_NOTICE_SECONDS = 30.0
"""How long a batch round runs before its executor reports it (`batchRunningSince`): far beyond a
healthy round, so the report changes only for a round that hangs, and far below any `batchTimeout`
worth setting."""

_PACKED_TEXT_LIMIT = 16 * 1_048_576  # inflated text: a packed target is never near this (decoding bound)
_PACKED_LINE = re.compile(r"([0-9]+(:[0-9]+)?(,[0-9]+(:[0-9]+)?)*)?")


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


class TargetTooLarge(ValueError):
    """A member's target that does not fit in one object even packed (`MAX_PACKED_CHARS`)."""


def pack_tasks(
    active: Iterable[tuple[int, int]],
    revoking: Iterable[tuple[int, int]],
    standby: Iterable[int],
    warmup: Iterable[int],
) -> str:
    """A target's task lists as `spec.packed`: base64 of deflated text, one line per role (active,
    revoking, standby, warmup), each entry the gap to the previous task of its line (the first's to
    -1) and, for owned tasks, `:epoch`; pure.

    Gaps, not task numbers: a member holding a range of tasks writes `1` over and over, one holding
    every M-th task `M`, and deflate turns either into a few bytes; epochs handed out together repeat.
    The same shapes as the lists cost ~27 bytes a task (2.7 MB at 100,000 tasks on one member)."""
    lines = [
        ",".join(f"{gap}:{epoch}" for gap, epoch in _gaps(dict(owned))) for owned in (active, revoking)
    ] + [",".join(str(gap) for gap, _ in _gaps(dict.fromkeys(copies, 0))) for copies in (standby, warmup)]
    return base64.b64encode(zlib.compress("\n".join(lines).encode("ascii"), 9)).decode("ascii")


def _gaps(epochs: Mapping[int, int]) -> list[tuple[int, int]]:
    previous, out = -1, []
    for task in sorted(epochs):
        out.append((task - previous, epochs[task]))
        previous = task
    return out


def unpack_tasks(packed: str, path: str) -> tuple[dict[int, int], dict[int, int], list[int], list[int]]:
    """Inverse of `pack_tasks`: (active, revoking, standby, warmup); strict, because a wrong target is
    worse than none — ValidationError naming `path` for anything `pack_tasks` would not write."""
    lines = _inflate(packed, path).split("\n")
    if len(lines) != 4 or not all(_PACKED_LINE.fullmatch(line) for line in lines):
        raise ValidationError(path, "is not four lines of task gaps (and epochs)")
    active, revoking, standby, warmup = (
        _line_tasks(line, index < 2, path) for index, line in enumerate(lines)
    )
    return active, revoking, list(standby), list(warmup)


def _inflate(packed: str, path: str) -> str:
    """The text of a packed field: base64 checked, deflate's checksum checked, bounded when inflated."""
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(base64.b64decode(packed, validate=True), _PACKED_TEXT_LIMIT)
        if inflater.unconsumed_tail or not inflater.eof:
            raise ValidationError(path, "does not inflate to a whole packed text within its bound")
        return raw.decode("ascii")
    except (binascii.Error, zlib.error, UnicodeDecodeError) as error:
        raise ValidationError(path, f"does not decode: {error}") from error


def _line_tasks(line: str, epochs: bool, path: str) -> dict[int, int]:
    """The tasks of one line of gaps (→ their epochs, or 0 for a line without)."""
    task, found = -1, {}
    for entry in filter(None, line.split(",")):
        gap, colon, epoch = entry.partition(":")
        if int(gap) < 1 or bool(colon) != epochs:
            raise ValidationError(path, f"entry {entry!r} is not a task gap as written")
        task += int(gap)
        found[task] = int(epoch or 0)
    return found


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
    packed: str | None = field(
        default=None,
        metadata=prop(
            "The task lists in compact form, written instead of active, revoking, standby and warmup "
            "when those would take over 512 KiB (about 19,000 tasks on one member; etcd refuses "
            "an object over 1.5 MiB): base64 of deflated text, one line per role, each entry the gap to the previous "
            "task and, for owned tasks, :epoch. Executors read both forms.",
            max_length=MAX_PACKED_CHARS,
        ),
    )

    def __post_init__(self) -> None:
        """A packed target reads as its lists: every reader (executor, operator, kubectl plugin) sees
        the same model whichever form was written, and `packed` is only ever a wire form."""
        if self.packed is None:
            return
        path = f"{self.PATH}.packed"
        active, revoking, standby, warmup = unpack_tasks(self.packed, path)
        listed = [
            ({t.task for t in self.active}, active),
            ({t.task for t in self.revoking}, revoking),
            (set(self.standby), standby),
            (set(self.warmup), warmup),
        ]
        for role, (tasks, unpacked) in zip(("active", "revoking", "standby", "warmup"), listed, strict=True):
            if tasks & set(unpacked):
                raise ValidationError(path, f"names {role} tasks the {role} list names too")
        resolved = {
            "active": tuple(
                sorted((*self.active, *(ActiveTask(task=t, epoch=e) for t, e in active.items())), key=_task)
            ),
            "revoking": tuple(
                sorted(
                    (*self.revoking, *(RevokingTask(task=t, epoch=e) for t, e in revoking.items())), key=_task
                )
            ),
            "standby": tuple(sorted((*self.standby, *standby))),
            "warmup": tuple(sorted((*self.warmup, *warmup))),
            "packed": None,
        }
        for name, value in resolved.items():
            object.__setattr__(self, name, value)

    def wire(self) -> dict[str, Any]:
        """The spec as the operator writes it: the lists while they fit in `LIST_FORM_BYTES` — the
        form every executor version reads, byte for byte what the previous operator wrote — packed
        beyond (`pack_tasks`), where the lists could not have been written at all. Raises
        `TargetTooLarge` when even the packed form would not fit (`MAX_PACKED_CHARS`), so the caller
        refuses the plan before it writes anything."""
        listed = self.to_dict()
        if len(json.dumps(listed, separators=(",", ":"))) <= LIST_FORM_BYTES:
            return listed
        # A revocation's `since` has no place in the packed text; those few entries stay listed.
        dated = tuple(t for t in self.revoking if t.since is not None)
        packed = pack_tasks(
            ((t.task, t.epoch) for t in self.active),
            ((t.task, t.epoch) for t in self.revoking if t.since is None),
            self.standby,
            self.warmup,
        )
        if len(packed) > MAX_PACKED_CHARS:
            raise TargetTooLarge(
                f"member {self.member_id}'s target of {len(self.active) + len(self.revoking)} owned and "
                f"{len(self.standby) + len(self.warmup)} copied tasks packs to {len(packed)} characters, "
                f"over the {MAX_PACKED_CHARS} a member's spec may hold (etcd refuses objects over 1.5 MiB)"
            )
        return {
            **listed,
            "active": [],
            "revoking": [t.to_dict() for t in dated],
            "standby": [],
            "warmup": [],
            "packed": packed,
        }

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


def _task(entry: ActiveTask | RevokingTask) -> int:
    return entry.task


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
            "longer holds the commits it names: a wiped or different store), delta-expired (the "
            "changelog after it was compacted: older than stateStore.deltaRetention or over "
            "deltaRetentionSize) or delta-larger (the changelog since it holds more bytes than the "
            "newest snapshot and the changelog after that: a full restore reads less)."
        ),
    )


@dataclass(frozen=True, kw_only=True)
class LocalCopy(Model):
    """A task's local state the member keeps but does not run."""

    task: int = field(metadata=prop("Task (partition) number.", minimum=0))
    applied_offset: int = field(
        metadata=prop("Input offset up to which the kept local state is current.", minimum=0)
    )


LOCAL_COPIES_REPORTED = 256
"""The most local copies a report lists (the newest checkpointed first): a member that gave up
thousands of tasks within `deltaRetention` must not outgrow its object. What it leaves out the
operator estimates as a restore in full, as it did before members reported them."""


ROLES: tuple[TaskRole, ...] = typing.get_args(TaskRole)


def significant(value: int | None) -> int | None:
    """`value` rounded up to two significant digits (1,234 → 1,300; below 100 unchanged), so the
    packed report's figures deflate to about a byte each; pure. Up, so a copy never reads as more
    caught up than it is: a lag at or below a threshold after rounding was at or below it before."""
    if value is None or value < 100:
        return value
    unit: int = 10 ** (len(str(value)) - 2)
    return -(-value // unit) * unit


REPORT_FIGURES = ("lag", "restore_rows", "input_lag")
"""The figures a packed report keeps per copy, in the order they are given up when it would not fit
otherwise: the input lag (autoscaling's sum) first, then restore sizes (an estimate); lags last,
since a copy's lag is what releases a handoff."""


def pack_report(
    rows: Iterable[TaskReport], budget: int = REPORT_LIST_BYTES
) -> tuple[str, tuple[TaskReport, ...]]:
    """A report too large for rows as (`status.packed`, the rows still listed whole); pure.

    Every copy stays, by task and role (what the operator counts as processed, and acknowledges
    against), with its lag, restore size and input lag rounded up to two significant digits
    (`significant`): base64 of deflated text, four lines of task gaps (one per role, as `pack_tasks`)
    and three of figures in that row order. Where that would not fit in `budget` (figures that are
    all different and large: ~6 bytes a copy), the input lags are left blank, then the restore sizes
    (`REPORT_FIGURES`); task gaps and lags alone take at most ~2 bytes a copy, ~0.2 MB at 100,000.
    What the operator acts on per task but only a few rows carry — fencing, a store epoch above an
    owned copy's own, how a task resumed — stays a whole row, in that order of priority, as many as
    fit in what `budget` leaves (~3,000); the rest are left out until those before them drop out (a
    fenced task once the operator has given it a new epoch). Left out for every copy: the report's
    epochs and applied positions, which the operator does not read."""
    by_role: dict[str, list[TaskReport]] = {role: [] for role in ROLES}
    for row in sorted(rows, key=lambda r: r.task):
        by_role[row.role].append(row)
    ordered = [row for role in ROLES for row in by_role[role]]
    lines = [
        ",".join(str(gap) for gap, _ in _gaps(dict.fromkeys((r.task for r in by_role[role]), 0)))
        for role in ROLES
    ]
    columns = {
        figure: ",".join(_cell(significant(getattr(r, figure))) for r in ordered) for figure in REPORT_FIGURES
    }
    blank = "," * (len(ordered) - 1) if ordered else ""
    for kept in range(len(REPORT_FIGURES), 0, -1):
        figures = [columns[f] if i < kept else blank for i, f in enumerate(REPORT_FIGURES)]
        text = "\n".join([*lines, *figures]).encode("ascii")
        packed = base64.b64encode(zlib.compress(text, 9)).decode("ascii")
        if len(packed) <= budget:
            break
    room = budget - len(packed)
    whole: list[TaskReport] = []
    for row in sorted(filter(_notable, ordered), key=_priority):
        size = len(json.dumps(row.to_dict(), separators=(",", ":"))) + 1
        if size > room:
            break
        room -= size
        whole.append(row)
    return packed, tuple(sorted(whole, key=lambda r: (r.task, ROLES.index(r.role))))


def _cell(value: int | None) -> str:
    return "" if value is None else str(value)


def _notable(row: TaskReport) -> bool:
    """Whether a row says more than its packed form keeps. A store epoch counts only above an owned
    copy's own epoch: a standby's or warmup's is its owner's, which the operator handed out itself."""
    ahead = row.role in ("active", "revoking") and (row.store_epoch or 0) > (row.epoch or 0)
    return row.fenced_by is not None or ahead or row.resumed_by is not None


def _priority(row: TaskReport) -> int:
    return 0 if row.fenced_by is not None else 1 if row.resumed_by is None else 2


def unpack_report(packed: str, path: str) -> tuple[TaskReport, ...]:
    """Inverse of `pack_report`'s text: one row per copy with its rounded figures; ValidationError
    naming `path` for anything it would not write."""
    lines = _inflate(packed, path).split("\n")
    if len(lines) != len(ROLES) + 3 or not all(_PACKED_LINE.fullmatch(line) for line in lines[: len(ROLES)]):
        raise ValidationError(path, f"is not {len(ROLES)} lines of task gaps and 3 of figures")
    copies = [
        (task, role)
        for role, line in zip(ROLES, lines, strict=False)
        for task in _line_tasks(line, False, path)
    ]
    figures: list[list[int | None]] = []
    for line in lines[len(ROLES) :]:
        cells = line.split(",") if copies else []
        if len(cells) != len(copies) or not all(c == "" or c.isdigit() for c in cells):
            raise ValidationError(
                path, f"a figure line does not hold one number or blank per copy ({len(copies)})"
            )
        figures.append([int(c) if c else None for c in cells])
    return tuple(
        TaskReport(task=task, role=role, lag=lag, restore_rows=rows, input_lag=input_lag)
        for (task, role), lag, rows, input_lag in zip(copies, *figures, strict=True)
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
    local_copies: tuple[LocalCopy, ...] = field(
        default=(),
        metadata=prop(
            "Tasks this member keeps local state of but does not run: copies it gave up, left "
            "checkpointed on its volume until stateStore.deltaRetention prunes them, each with the "
            "input offset it is current to (at most "
            f"{LOCAL_COPIES_REPORTED}, the newest). Given such a task again, the member replays only "
            "the changelog since, so the operator estimates its restore there as that delta.",
            list_map_keys=("task",),
            atomic=True,
            max_items=LOCAL_COPIES_REPORTED,
        ),
    )
    restore_rate: float | None = field(
        default=None,
        metadata=prop(
            "Rows a second this executor restores state at from the shared store, all its restores "
            "together: the rows its copies restored over the seconds during which at least one of them "
            "was restoring (unset until enough rows were restored to measure). Restores running side "
            "by side share it; the operator queues a lost task's restore behind those its destination "
            "runs first and estimates it at this rate.",
            minimum=0,
        ),
    )
    processed_records: int | None = field(
        default=None,
        metadata=prop(
            "Input records this executor's active copies processed since it started (a counter); with "
            "busySeconds, the member's true processing rate, which spec.autoscaling sizes the app by. "
            "Unset from an executor that does not measure it.",
            minimum=0,
        ),
    )
    busy_seconds: float | None = field(
        default=None,
        metadata=prop(
            "Seconds this executor's batch rounds spent processing since it started (a counter: busy "
            "time, not wall time, so that a member waiting for input still says how fast it processes).",
            minimum=0,
        ),
    )
    batch_running_since: str | None = field(
        default=None,
        metadata=prop(
            "When the batch round running now began, once it has run for over "
            f"{BATCH_NOTICE_SECONDS:g} s (a healthy round takes seconds); unset otherwise. The operator "
            "replaces the member's pod when a round outlasts spec.rebalance.batchTimeout: its Spark is stuck.",
            format="date-time",
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

    packed: str | None = field(
        default=None,
        metadata=prop(
            "The copies in compact form, written when their rows would not fit in one object (over "
            "512 KiB: thousands of copies on one member): every copy by task and role with its lag, "
            "restoreRows and inputLag rounded up to two significant digits, base64 of deflated text; "
            "tasks then lists only the copies that say more (fenced, an owned copy's store epoch above "
            "its own, how they resumed), as many as fit. Operators read both forms.",
            max_length=REPORT_LIST_BYTES,
        ),
    )

    def __post_init__(self) -> None:
        """A packed report reads as its rows (those listed whole win over their packed twins): the
        operator reads one model whichever form the executor wrote."""
        if self.packed is None:
            return
        whole = {(t.task, t.role): t for t in self.tasks}
        rows = [whole.pop((t.task, t.role), t) for t in unpack_report(self.packed, f"{self.PATH}.packed")]
        object.__setattr__(self, "tasks", (*rows, *whole.values()))
        object.__setattr__(self, "packed", None)

    def merge_patch(self) -> dict[str, Any]:
        """This status as the body of a JSON merge patch of the status subresource: fields left unset
        are written as null, which removes them, so a started executor's first report clears the
        setup error an earlier start left. Rows while they fit in `REPORT_LIST_BYTES` (what every
        operator version reads), packed beyond (`pack_report`)."""
        wire = self.to_dict()
        patch = {wire_name(f): wire.get(wire_name(f)) for f in fields(self)}
        if len(json.dumps(wire.get("tasks", []), separators=(",", ":"))) > REPORT_LIST_BYTES:
            packed, whole = pack_report(self.tasks)
            patch.update(tasks=[t.to_dict() for t in whole], packed=packed)
        return {"status": patch}


def report_rows(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A member status's rows in wire form, a packed report unpacked (for readers of the raw body);
    a packed report that does not parse has none, as an unreadable report is none
    (`controller.observe.member_status`)."""
    if status.get("packed") is None:
        return list(status.get("tasks") or [])
    try:
        return [row.to_dict() for row in StreamAppMemberStatus.from_dict(status).tasks]
    except ValidationError:
        return []


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
