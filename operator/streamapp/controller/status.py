"""The StreamApp status the operator writes: intent, counts, members, conditions (pure).

`intent` is the engine's persisted assignment (in the compact form of `controller.intent`) — written
before any child is touched, so a restarted operator resumes the handoff it was in. The rest is for
people and tools: `kubectl get sapp` columns, `/scale` for HPA and KEDA, conditions with reasons and
messages.

Every status is built as the typed `StreamAppStatus` and written through `patch`, which names the
fields the writer owns: a field it owns but leaves unset is removed (an unmeasured `inputLag`), a field
it does not own is left as it is.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from streamapp.api.conditions import OWN_TYPES, ConditionStatus, ConditionType
from streamapp.api.conditions import Condition as StatusCondition
from streamapp.api.fields import ValidationError
from streamapp.api.member import report_rows
from streamapp.api.meta import ObjectMeta
from streamapp.api.names import member_name, selector
from streamapp.api.streamapp import (
    Flapping,
    LastRebalance,
    LostTaskChoice,
    LostTasks,
    MemberPhase,
    MemberSummary,
    StreamApp,
    StreamAppStatus,
    TaskCounts,
)
from streamapp.controller.acknowledgement import acked_generation
from streamapp.controller.intent import encode as encode_intent
from streamapp.controller.observe import PodState
from streamapp.rebalance import Assignment, LostMember, MemberView, Plan
from streamapp.rebalance.model import Flap

Body = Mapping[str, Any]
INVALID_SPEC = "InvalidSpec"
RECONCILE_FAILED = "ReconcileFailed"
FENCED_ACTIVE = "FencedActive"
SETUP_FAILED = "ExecutorSetupFailed"
# The fields a reconcile step writes (`app_status`, then rollout revisions, costs and pod starts); the
# others are written by other writers (`invalid_spec_status`, `failing_status` write conditions only).
STEP_FIELDS = (
    "observedGeneration",
    "generation",
    "replicas",
    "readyReplicas",
    "updatedReplicas",
    "currentRevision",
    "updateRevision",
    "selector",
    "tasks",
    "inputLag",
    "members",
    "handoffSeconds",
    "podStartSeconds",
    "restoreRate",
    "conditions",
    "intent",
    "autoscaling",
)


@dataclass(frozen=True)
class Condition:
    """One standard condition (type, status, reason, message)."""

    type: ConditionType
    status: bool
    reason: str
    message: str


def patch(status: StreamAppStatus, fields: Iterable[str]) -> dict[str, Any]:
    """The merge patch of the `fields` (wire names) a writer owns: each as `status` has it, an unset
    one as null, which removes it."""
    wire = status.to_dict()
    return {key: wire.get(key) for key in fields}


def step_patch(status: StreamAppStatus) -> dict[str, Any]:
    """What a reconcile step writes: `STEP_FIELDS`, and `lastRebalance` when the step changed the
    assignment (otherwise the last change stays shown)."""
    return patch(status, (*STEP_FIELDS, *(("lastRebalance",) if status.last_rebalance else ())))


def stored_conditions(status: Body) -> tuple[StatusCondition, ...]:
    """The conditions a stored status holds (its wire form), for a body that does not parse as a
    whole (a refused spec, a reconcile failing before the parse); one that does not parse itself
    (edited by hand) is left out, and the next write replaces it."""
    kept = []
    for raw in status.get("conditions") or []:
        try:
            kept.append(StatusCondition.from_dict(raw, "status.conditions"))
        except (ValidationError, TypeError):
            continue
    return tuple(kept)


def foreign(stored: Sequence[StatusCondition]) -> tuple[StatusCondition, ...]:
    """The stored conditions of types the operator does not set (another tool's, another version's):
    every status write keeps them as they are."""
    return tuple(c for c in stored if c.type not in OWN_TYPES)


def task_counts(assignment: Assignment, views: Sequence[MemberView]) -> TaskCounts:
    """Tasks by state: processed by a live member, warming, reserved, revoking, unassigned."""
    alive = {v.id for v in views if v.alive}
    return TaskCounts(
        active=sum(1 for t in assignment.tasks if t.active in alive and t.revoking_since is None),
        revoking=sum(1 for t in assignment.tasks if t.revoking_since is not None),
        warming=sum(1 for t in assignment.tasks if t.warmups and t.revoking_since is None),
        reserved=sum(1 for t in assignment.tasks if t.active is not None and t.active not in alive),
        unassigned=sum(1 for t in assignment.tasks if t.active is None),
    )


def conditions(
    counts: TaskCounts,
    replicas: int,
    ready: int,
    in_flight: bool,
    started: bool = True,
    fenced: Sequence[int] = (),
    unconfirmed: Sequence[int] = (),
    setup_errors: Mapping[int, str] | None = None,
    pod_problems: Mapping[int, str] | None = None,
) -> list[Condition]:
    """Ready, Rebalancing and Degraded, each with the reason a person would look for first.

    Before the first assignment (`started` False) tasks are unassigned only because no member has been
    ready yet: the app is starting, not degraded (Argo CD shows Progressing, not Degraded, on install).
    A `fenced` task has an owner that processes nothing because the store holds a higher epoch; it is
    being given a new one, and until its owner runs under it the app is neither Ready nor healthy.
    An `unconfirmed` task has an owner whose executor has not yet reported processing it (starting,
    restoring, or not running at all): Ready waits for it, but it is no reason to call the app Degraded.
    A member with a `setup_errors` entry cannot start with this spec (say the Kafka topic has another
    partition count): that is what a person must fix first, so Degraded names it before anything else.
    `pod_problems` say what keeps a member's pod from running (a missing Secret, a claim nothing
    provisions, an image that does not pull): named in Ready's message and in Degraded's, so that held
    tasks come with the reason they are held.
    """
    held = counts.reserved + counts.unassigned
    ready_ok = held == 0 and ready >= replicas and not fenced and not unconfirmed
    ready_reason = (
        "AllTasksProcessed"
        if ready_ok
        else (
            "TasksNotProcessed"
            if (held or fenced) and started
            else ("TasksNotConfirmed" if unconfirmed and ready >= replicas else "MembersStarting")
        )
    )
    ready_message = f"{counts.active} tasks active on {ready}/{replicas} ready members"
    if held:
        ready_message += f"; {counts.reserved} reserved for lost members, {counts.unassigned} unassigned"
    if fenced:
        ready_message += f"; {len(fenced)} fenced by the state store"
    if unconfirmed:
        ready_message += f"; {len(unconfirmed)} not yet confirmed processing by their owner"
    problems = problems_message(pod_problems or {})
    if problems:
        ready_message += f"; {problems}"
    degraded = (held > 0 and started) or bool(fenced) or bool(setup_errors)
    degraded_reason, degraded_message = (
        (SETUP_FAILED, setup_message(setup_errors))
        if setup_errors
        else (FENCED_ACTIVE, fenced_message(fenced))
        if fenced
        else (
            "TasksHeld",
            f"{held} tasks are not processed by any member" + (f"; {problems}" if problems else ""),
        )
        if degraded
        else ("AsExpected", "every task has a live owner")
        if started
        else ("Starting", "no member has been ready yet")
    )
    return [
        Condition("Ready", ready_ok, ready_reason, ready_message),
        Condition(
            "Rebalancing",
            in_flight,
            "HandoffInProgress" if in_flight else "Stable",
            f"{counts.warming} warming, {counts.revoking} revoking" if in_flight else "no handoff in flight",
        ),
        Condition("Degraded", degraded, degraded_reason, degraded_message),
    ]


def problems_message(problems: Mapping[int, str]) -> str:
    """What keeps members' pods from running, one entry per distinct problem, naming the members."""
    members: dict[str, list[int]] = {}
    for member, problem in sorted(problems.items()):
        members.setdefault(problem, []).append(member)
    return "; ".join(
        f"pod of member{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}: {problem}"
        for problem, ids in members.items()
    )[:2000]


def setup_message(errors: Mapping[int, str]) -> str:
    """One line per distinct error, naming its members (they usually share it: the spec is one)."""
    members: dict[str, list[int]] = {}
    for member, error in sorted(errors.items()):
        members.setdefault(error, []).append(member)
    lines = [
        f"executor of member{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} cannot start: {error}"
        for error, ids in members.items()
    ]
    return "; ".join(lines)[:2000]


def fenced_message(tasks: Sequence[int]) -> str:
    """Which tasks are fenced and what the operator does about it (named, so it is never silent)."""
    shown = ",".join(str(t) for t in tasks[:20]) + (f",… ({len(tasks)} in all)" if len(tasks) > 20 else "")
    return (
        f"tasks {shown} are fenced: the state store holds a higher epoch than their owner's (was the "
        "app re-created on an existing store?); they are given new epochs above the store's"
    )


def invalid_spec_status(
    meta: ObjectMeta, stored: Sequence[StatusCondition], error: str, now: str
) -> dict[str, Any]:
    """The status patch for a spec the models refuse (`stored`: the conditions its status holds):
    nothing is planned or changed, and Ready=False / Degraded=True with reason InvalidSpec say why (the
    Event alone is gone after an hour; health checks such as manifests/argocd/health.lua read
    conditions). `intent` is left as it was."""
    message = f"the spec is refused: {error}"[:1000]
    refused = [
        Condition("Ready", False, INVALID_SPEC, message),
        Condition("Rebalancing", False, INVALID_SPEC, "nothing moves until the spec is fixed"),
        Condition("Degraded", True, INVALID_SPEC, message),
    ]
    status = StreamAppStatus(
        observed_generation=meta.generation,
        conditions=merge_conditions(stored, refused, now, meta.generation or 0) + foreign(stored),
    )
    return patch(status, ("observedGeneration", "conditions"))


def failing_status(meta: ObjectMeta, old: Sequence[StatusCondition], error: str, now: str) -> dict[str, Any]:
    """The status patch for a reconcile that keeps failing (an API error that does not go away, such
    as a claim the API server refuses): Degraded=True with reason ReconcileFailed and the error, the
    other conditions (`old`, as stored) as they were. The next reconcile that succeeds writes every
    condition anew."""
    kept = [
        Condition(cast(ConditionType, c.type), c.status == "True", c.reason, c.message)
        for c in old
        if c.type != "Degraded" and c.type in OWN_TYPES
    ]
    failing = Condition("Degraded", True, RECONCILE_FAILED, f"reconcile keeps failing: {error}"[:1000])
    merged = merge_conditions(old, [*kept, failing], now, meta.generation or 0)
    status = StreamAppStatus(conditions=merged + foreign(old))
    return patch(status, ("conditions",))


def merge_conditions(
    old: Sequence[StatusCondition], new: Sequence[Condition], now: str, generation: int
) -> tuple[StatusCondition, ...]:
    """Standard conditions; `lastTransitionTime` moves only when a condition's status flips."""
    before = {c.type: c for c in old}
    merged = []
    for condition in new:
        status: ConditionStatus = "True" if condition.status else "False"
        previous = before.get(condition.type)
        since = previous.last_transition_time if previous and previous.status == status else now
        merged.append(
            StatusCondition(
                type=condition.type,
                status=status,
                reason=condition.reason,
                message=condition.message,
                last_transition_time=since or now,
                observed_generation=generation,
            )
        )
    return tuple(merged)


def members_summary(
    app: str,
    assignment: Assignment,
    views: Sequence[MemberView],
    pods: Mapping[int, PodState],
    replicas: int,
    lost: Sequence[LostMember] = (),
) -> tuple[MemberSummary, ...]:
    """Per member: its pod, phase and what it holds (a readable `kubectl get -o yaml`), for a lost
    member holding tasks what happens to them (`lostTasks`), and for a member damped for flapping
    its losses (`flapping`).

    Counted in one pass over the tasks: at 100,000 tasks and 1,000 members a count per member would
    walk the tasks a thousand times in every reconcile.
    """
    active: Counter[int] = Counter(t.active for t in assignment.tasks if t.active is not None)
    standby: Counter[int] = Counter(m for t in assignment.tasks for m in t.standbys)
    warmup: Counter[int] = Counter(m for t in assignment.tasks for m in t.warmups)
    weighed = {m.member: m for m in lost}
    damped = {f.member: f for f in assignment.flaps if f.damped}
    rows = []
    for view in views:
        pod = pods.get(view.id)
        phase = (
            "Draining"
            if view.id >= replicas or (view.alive and view.retiring)
            else "Ready"
            if view.alive
            else ("Restarting" if view.returning else "Lost")
            if active[view.id]
            else "Starting"
        )
        rows.append(
            MemberSummary(
                id=view.id,
                pod=pod.name if pod else member_name(app, view.id),
                phase=cast(MemberPhase, phase),
                active=active[view.id],
                standby=standby[view.id],
                warmup=warmup[view.id],
                lost_tasks=lost_tasks(weighed[view.id]) if view.id in weighed else None,
                flapping=flapping(damped[view.id]) if view.id in damped else None,
            )
        )
    return tuple(rows)


def lost_tasks(lost: LostMember) -> LostTasks:
    """A lost member's `lostTasks` status: the engine's choice and the figures behind it, rounded so
    that the status changes when they do, not with every report's last digit."""
    return LostTasks(
        choice=cast(LostTaskChoice, lost.choice),
        held=len(lost.held),
        restoring=len(lost.restoring),
        reason=lost.reason[:1000],
        expected_back_seconds=None if lost.back_at is None else round(lost.back_at - lost.lost_at, 1),
        restore_seconds=None if lost.restore_seconds is None else two_figures(lost.restore_seconds),
        restore_rows=lost.restore_rows,
        restore_rate=None if lost.restore_rate is None else two_figures(lost.restore_rate),
    )


def flapping(flap: Flap) -> Flapping:
    """A damped member's `flapping` status: its losses within the window, and since when it is up."""
    up = None if flap.up_since is None else dt.datetime.fromtimestamp(flap.up_since, dt.UTC)
    return Flapping(
        losses=len(flap.losses), up_since=None if up is None else up.strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def two_figures(value: float) -> float:
    """`value` to two significant figures: a measured rate moves with every report of a live member,
    and the status is written only when something it shows changes."""
    return float(f"{value:.2g}")


@dataclass(frozen=True)
class ReportDigest:
    """What the app's status reads from one StreamAppMember (`digest`): computed once per version of
    the object by the app's memo (`controller.memo`), since a member's report lists every copy it holds
    and a reconcile of a large app would otherwise walk every member's list, changed or not."""

    member: int | None
    pod_uid: str | None
    started_at: str | None
    acknowledged: int
    target_generation: int
    input_lags: Mapping[int, int]
    processing: frozenset[int]
    setup_error: str | None


def digest(body: Body) -> ReportDigest:
    """The digest of one StreamAppMember body (its spec's member id and generation, its report)."""
    spec, status = body.get("spec") or {}, body.get("status") or {}
    member = spec.get("memberId")
    tasks = [t for t in report_rows(status) if t.get("role") == "active"]
    return ReportDigest(
        member=int(member) if member is not None else None,
        pod_uid=status.get("podUID"),
        started_at=status.get("startedAt"),
        acknowledged=acked_generation(body),
        target_generation=int(spec.get("generation") or 0),
        input_lags={int(t["task"]): int(t["inputLag"]) for t in tasks if t.get("inputLag") is not None},
        processing=frozenset(int(t["task"]) for t in tasks if t.get("fencedBy") is None),
        setup_error=str(status["setupError"]) if status.get("setupError") else None,
    )


def _current(digests: Iterable[ReportDigest], pods: Mapping[int, PodState]) -> list[ReportDigest]:
    """The digests of reports made by their member's current executor (`PodState.made`): a report
    from before a restart describes a process that is gone."""
    return [
        d
        for d in digests
        if d.member is not None
        and (pod := pods.get(d.member)) is not None
        and pod.made(d.pod_uid, d.started_at)
    ]


def input_lag(
    assignment: Assignment, reports: Iterable[ReportDigest], pods: Mapping[int, PodState]
) -> int | None:
    """Source records the active owners have not processed yet, summed over tasks; None while no owner
    has reported one (an autoscaler must not read "nothing measured" as "nothing to do").

    Per task only its owner in the assignment counts, so a task that just moved is not counted twice
    from its previous owner's last report; and only reports made by the member's current executor.
    """
    tasks = assignment.tasks
    lags = [
        lag
        for d in _current(reports, pods)
        for task, lag in d.input_lags.items()
        if task < len(tasks) and tasks[task].active == d.member
    ]
    return sum(lags) if lags else None


def unconfirmed(
    assignment: Assignment, reports: Iterable[ReportDigest], pods: Mapping[int, PodState]
) -> list[int]:
    """Tasks whose active owner has not yet confirmed it processes them: its current pod has not
    acknowledged its latest target, or does not report the task as active and unfenced. A pod being
    Ready says only that the process is up; Ready for the app means the tasks are really processed."""
    confirmed = {
        d.member: d.processing for d in _current(reports, pods) if d.acknowledged >= d.target_generation
    }
    nothing: frozenset[int] = frozenset()
    return [
        task
        for task, t in enumerate(assignment.tasks)
        if t.active is not None and t.revoking_since is None and task not in confirmed.get(t.active, nothing)
    ]


def setup_errors(reports: Iterable[ReportDigest], pods: Mapping[int, PodState]) -> dict[int, str]:
    """Member id → why its executor cannot start, from reports of the member's current pod only (an
    error from a pod since replaced is no longer true)."""
    return {
        d.member: d.setup_error
        for d in _current(reports, pods)
        if d.member is not None and d.setup_error is not None
    }


def moved(previous: Assignment, current: Assignment) -> int:
    """Tasks whose active owner changed to another member in this step."""
    if not previous.tasks:
        return 0
    return sum(
        1
        for old, new in zip(previous.tasks, current.tasks, strict=True)
        if new.active is not None and old.active is not None and old.active != new.active
    )


def status_changes(current: Body, status: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of `status` that differ from the `current` status (wire form): the merge patch to
    send."""
    return {
        key: replacing(current.get(key), value) for key, value in status.items() if current.get(key) != value
    }


def replacing(current: Any, value: Any) -> Any:
    """`value` as a merge patch that leaves nothing of `current` behind: a merge patch merges objects
    key by key, so keys only `current` has are written as null (removed). Without it a format-1 intent's
    task list would stay beside the format-2 intent written over it, and a stray key forever."""
    if not isinstance(current, Mapping) or not isinstance(value, Mapping):
        return value
    patch = {key: None for key in current if key not in value}
    patch.update({key: replacing(current.get(key), v) for key, v in value.items()})
    return patch


def app_status(
    app: StreamApp,
    result: Plan,
    previous: Assignment,
    views: Sequence[MemberView],
    pods: Mapping[int, PodState],
    now: str,
    reports: Sequence[ReportDigest] = (),
    intent: Mapping[str, Any] | None = None,
) -> StreamAppStatus:
    """The status one reconcile decides (written by `step_patch`); `reports` are the digests of the
    StreamAppMembers, which give `inputLag` (unset, which the patch turns into a removal, without
    them); `intent` is the assignment already encoded, when the caller keeps it (`controller.memo`)."""
    meta, replicas = app.metadata, app.spec.replicas
    assignment = result.assignment
    counts = task_counts(assignment, views)
    ready = sum(1 for v in views if v.alive and v.id < replicas)
    decided = conditions(
        counts,
        replicas,
        ready,
        assignment.in_flight(),
        started=assignment.generation > 0,
        fenced=result.fenced,
        unconfirmed=unconfirmed(assignment, reports, pods),
        setup_errors=setup_errors(reports, pods),
        pod_problems={m: p.problem for m, p in pods.items() if p.problem and m < replicas},
    )
    changed = LastRebalance(time=now, reason=result.reason[:1000], moved=moved(previous, assignment))
    return StreamAppStatus(
        observed_generation=meta.generation,
        generation=assignment.generation,
        replicas=sum(1 for m in pods if m < replicas),
        ready_replicas=ready,
        selector=selector(meta.name),
        tasks=counts,
        input_lag=input_lag(assignment, reports, pods),
        members=members_summary(meta.name, assignment, views, pods, replicas, result.lost),
        conditions=merge_conditions(app.status.conditions, decided, now, meta.generation or 0),
        intent=dict(encode_intent(assignment) if intent is None else intent),
        last_rebalance=changed if result.changed else None,
    )
