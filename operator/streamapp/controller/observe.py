"""What the operator sees, turned into what the engine needs (functional core, no I/O).

Liveness comes from the kubelet: a member is alive while its pod exists, is not being deleted and is
Ready. A pod someone else is deleting (an eviction, a node drain) whose executor is still Ready is
*draining*: alive, but retiring, so the engine hands its tasks over at once while the executor finishes
them within its grace period; a pod the operator deletes itself (a restart) is not alive. Lags come from
the member's status only when the report was made by the executor that runs now (`PodState.made`: the
pod that exists now, `status.podUID`, and a process started since its container last started,
`status.startedAt`), because a report from before a restart says nothing about what state survived or
what the new process has opened; so do fenced tasks, since a new pod takes over afresh. Acknowledgements
count whoever made them: an old pod that acknowledged a revocation did let go. Store epochs count
whoever reported them too: the store never forgets an epoch, so any report is a lower bound for the next
one. Capacity comes from the pod that runs now (its CPU request, `controller.capacity`) unless the spec
sets it. A member that is not alive but whose pod is visibly starting again — its container restarting
after a first crash, a replacement pod scheduled — is *returning*, and so is one whose pod the operator
itself just deleted to restart it, or whose pod is missing (the same reconcile creates it): the engine
weighs waiting for it against restoring its tasks elsewhere. Restore sizes (`restoreRows`) and rates
(`restoreRate`) count from any report, like store epochs: they describe the store and the member's node,
not the pod. How long the app's pods take to start (`PodState.start_seconds`) is read off the pods
themselves: creation, or the container's last start, to the Ready condition.
"""

from __future__ import annotations

import datetime as dt
import logging
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from streamapp.api.fields import ValidationError
from streamapp.api.member import MAX_EPOCH, StreamAppMemberStatus, TaskReport
from streamapp.api.names import (
    GROUP,
    HANDOFF_ANNOTATION,
    MEMBER_LABEL,
    RESTART_ANNOTATION,
    REVISION_LABEL,
    STUCK_RESTART,
)
from streamapp.api.podtemplate import EXECUTOR_CONTAINER
from streamapp.api.streamapp import StreamApp
from streamapp.controller.acknowledgement import acked_generation
from streamapp.controller.capacity import DEFAULT_CAPACITY, member_capacity, pod_capacity
from streamapp.rebalance import MemberView

log = logging.getLogger(__name__)
Body = Mapping[str, Any]
_NO_REPORT = StreamAppMemberStatus()


@dataclass(frozen=True)
class Owner:
    """The StreamApp that controls a child, by name and by uid (a re-created app has a new uid)."""

    name: str
    uid: str


def controlling_app(body: Body) -> Owner | None:
    """The StreamApp named by the child's controller ownerReference; None when it has none."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        api_group = str(ref.get("apiVersion", "")).split("/")[0]
        if ref.get("controller") and ref.get("kind") == StreamApp.KIND and api_group == GROUP:
            return Owner(str(ref.get("name", "")), str(ref.get("uid", "")))
    return None


def children_of(uid: str | None, bodies: Iterable[Body]) -> tuple[Body, ...]:
    """The bodies the incarnation of the app with this `uid` controls: labels alone prove nothing,
    and children of a deleted app of the same name (awaiting garbage collection) are not this app's."""
    return tuple(b for b in bodies if (owner := controlling_app(b)) is not None and owner.uid == uid)


@dataclass(frozen=True)
class Observed:
    """Everything one reconcile reads: the app and its children as the watches last saw them
    (`supporting`: its Service, PDB and the members' ServiceAccounts, Roles and RoleBindings)."""

    app: Body
    pods: tuple[Body, ...]
    members: tuple[Body, ...]
    zones: Mapping[str, str]
    supporting: tuple[Body, ...] = ()

    def owned(self) -> Observed:
        """Only the children this incarnation of the app controls (`children_of`)."""
        uid = (self.app.get("metadata") or {}).get("uid")
        return replace(
            self,
            pods=children_of(uid, self.pods),
            members=children_of(uid, self.members),
            supporting=children_of(uid, self.supporting),
        )


@dataclass(frozen=True)
class PodState:
    """The parts of a member pod the operator acts on."""

    member: int
    name: str
    uid: str
    ready: bool
    terminating: bool
    node: str | None
    finished: bool = False
    revision: str = ""
    handoff_since: float | None = None
    restarted: bool = False
    stuck: bool = False
    capacity: float = DEFAULT_CAPACITY
    forced: bool = False
    starting: bool = False
    start_seconds: float | None = None
    ready_since: float | None = None
    problem: str | None = None
    executor_started: float | None = None
    executor_finished: float | None = None

    @staticmethod
    def of(pod: Body) -> PodState | None:
        """Read a pod body; None when it does not carry a member label."""
        meta = pod.get("metadata", {})
        member = (meta.get("labels") or {}).get(MEMBER_LABEL)
        if member is None or not str(member).isdigit():
            return None
        status = pod.get("status") or {}
        annotations = meta.get("annotations") or {}
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return PodState(
            member=int(member),
            name=meta.get("name", ""),
            uid=meta.get("uid", ""),
            ready=ready,
            terminating=meta.get("deletionTimestamp") is not None,
            node=(pod.get("spec") or {}).get("nodeName"),
            finished=status.get("phase") in ("Failed", "Succeeded"),
            revision=str((meta.get("labels") or {}).get(REVISION_LABEL, "")),
            handoff_since=_seconds(annotations.get(HANDOFF_ANNOTATION)),
            restarted=RESTART_ANNOTATION in annotations,
            stuck=annotations.get(RESTART_ANNOTATION) == STUCK_RESTART,
            capacity=pod_capacity(pod),
            forced=meta.get("deletionGracePeriodSeconds") == 0,
            starting=_starting(status),
            start_seconds=_start_seconds(meta, status) if ready else None,
            ready_since=epoch_seconds(_ready_condition(status).get("lastTransitionTime")) if ready else None,
            problem=None if ready else pod_problem(status),
            executor_started=epoch_seconds(_running(status).get("startedAt")),
            executor_finished=epoch_seconds(_last_run(status).get("finishedAt")),
        )

    def made(self, pod_uid: str | None, started_at: str | None) -> bool:
        """Whether a report comes from the executor that runs in this pod now: made by this pod
        (`podUID`) by a process started (`startedAt`) no earlier than the executor container's last
        start. A container restarted in place keeps its pod's UID; its predecessor's last report, every
        task caught up, taken for the new process's, had a task handed back the moment the pod turned
        Ready, before the new process had said what state it had opened. Either time unknown (a report
        without `startedAt`, a container not running) leaves the UID to decide."""
        if pod_uid != self.uid:
            return False
        started = epoch_seconds(started_at)
        return started is None or self.executor_started is None or started >= self.executor_started

    @property
    def alive(self) -> bool:
        """Ready and not on its way out."""
        return self.ready and not self.terminating and not self.finished

    @property
    def draining(self) -> bool:
        """Deleted by someone else (an eviction, a node drain, kubectl delete) while its executor is
        still Ready: it can hand its tasks over before it goes. Not when deleted with no grace period
        (`forced`: a force delete, as for a node that is gone): the API server removes such a pod at
        once, and watchers see it terminating and still Ready for an instant first; taken for a
        drain, that instant revoked its tasks (they then moved cold) instead of holding them for it
        like any other lost member's."""
        return (
            self.terminating and self.ready and not self.finished and not self.restarted and not self.forced
        )

    @property
    def returning(self) -> bool:
        """Not alive, but visibly on its way back: scheduled, not being deleted, and its containers
        starting (`_starting`); or deleted by the operator to be restarted (`restarted`), which it
        re-creates as soon as it is gone (`MemberView.returning`)."""
        if self.terminating:
            return self.restarted and not self.alive
        return not self.alive and not self.finished and bool(self.node) and self.starting


STARTING_REASONS = frozenset({"ContainerCreating", "PodInitializing", "CrashLoopBackOff"})
"""Waiting reasons of a container on its way to running. Any other (ErrImagePull, ImagePullBackOff,
CreateContainerConfigError, ...) needs a person to fix something, so the member is not coming back."""

MAX_CRASHES_RETURNING = 1
"""Recent crashes of one container (`_recent_crashes`) after which its pod no longer counts as on its
way back: a first crash is a bounce, a second soon after it is the start of a crash loop."""

CRASH_LOOP_RUN_SECONDS = 600.0
"""Two crashes count as a loop only when the run between them was shorter than this (the default
`flapWindow`): `restartCount` counts over the pod's whole life, and a crash weeks after the last one is
a new bounce, not the second step of a loop."""


def _starting(status: Body) -> bool:
    """Whether the pod's containers are on their way to running: none waits for a reason other than
    starting, none has crashed more than once, and the executor is not running and ready — which,
    with the pod not Ready, means its node stopped reporting (the kubelet's last word is stale), not
    that it is starting."""
    init = [(c, True) for c in status.get("initContainerStatuses") or []]
    for container, is_init in [*init, *((c, False) for c in status.get("containerStatuses") or [])]:
        state = container.get("state") or {}
        waiting = state.get("waiting")
        if waiting is not None and waiting.get("reason", "ContainerCreating") not in STARTING_REASONS:
            return False
        if _recent_crashes(container, state, is_init) > MAX_CRASHES_RETURNING:
            return False
        if container.get("name") == EXECUTOR_CONTAINER and "running" in state and container.get("ready"):
            return False
    return True


def _recent_crashes(container: Body, state: Body, is_init: bool) -> int:
    """Crashes of the container (restarts done, and one pending) that are recent enough to make a loop:
    the latest, and the one before it only if the run between them (the run the latest crash ended,
    `state.terminated` or `lastState.terminated`) was shorter than `CRASH_LOOP_RUN_SECONDS`. A run of
    unknown length counts as short."""
    total = int(container.get("restartCount") or 0) + _crash_pending(state, is_init)
    if total < 2:
        return total
    run = state.get("terminated") or (container.get("lastState") or {}).get("terminated") or {}
    began, ended = epoch_seconds(run.get("startedAt")), epoch_seconds(run.get("finishedAt"))
    long_run = began is not None and ended is not None and ended - began >= CRASH_LOOP_RUN_SECONDS
    return 1 if long_run else 2


def _crash_pending(state: Body, is_init: bool) -> int:
    """1 when the container has stopped and will be started again (not yet in `restartCount`): waiting
    out the back-off, or just terminated — except an init container that finished its work (exit 0)."""
    if (state.get("waiting") or {}).get("reason") == "CrashLoopBackOff":
        return 1
    terminated = state.get("terminated")
    if terminated is None:
        return 0
    return int(not is_init or terminated.get("exitCode") != 0)


def pod_problem(status: Body) -> str | None:
    """What keeps a pod from running, as the kubelet or the scheduler said it (a Secret or ConfigMap
    that does not exist, an image that does not pull, a claim no StorageClass provisions, no node with
    room), for the app's conditions: without it a person saw only that tasks were held."""
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason and reason not in STARTING_REASONS:
            return f"{reason}: {waiting.get('message') or ''}".strip().rstrip(":")[:PROBLEM_CHARS]
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            found = f"{condition.get('reason') or 'Unschedulable'}: {condition.get('message') or ''}"
            return found.strip().rstrip(":")[:PROBLEM_CHARS]
    return None


PROBLEM_CHARS = 300


def _start_seconds(meta: Body, status: Body) -> float | None:
    """How long a Ready pod took to become ready: from its creation — or, when its executor container
    was restarted in place, from that container's last start — to the Ready condition's transition.
    None when a time is missing or does not parse."""
    ready = _ready_condition(status)
    began = (
        _running(status).get("startedAt")
        if int(_executor(status).get("restartCount") or 0) > 0
        else meta.get("creationTimestamp")
    )
    start, end = epoch_seconds(began), epoch_seconds(ready.get("lastTransitionTime"))
    return None if start is None or end is None or end < start else round(end - start, 1)


def _executor(status: Body) -> Body:
    """The executor container's status (empty when not reported yet)."""
    return next((c for c in status.get("containerStatuses") or [] if c.get("name") == EXECUTOR_CONTAINER), {})


def _running(status: Body) -> Body:
    """The executor container's `state.running` (empty when it is not running)."""
    return (_executor(status).get("state") or {}).get("running") or {}


def _last_run(status: Body) -> Body:
    """The executor container's last run that ended (`state.terminated`, else `lastState.terminated`),
    while it is not running; empty otherwise."""
    container = _executor(status)
    if _running(status):
        return {}
    state = container.get("state") or {}
    return state.get("terminated") or (container.get("lastState") or {}).get("terminated") or {}


def _ready_condition(status: Body) -> Body:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def epoch_seconds(value: object) -> float | None:
    """Epoch seconds of an RFC 3339 time as Kubernetes writes it; None when absent or malformed."""
    try:
        return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() if value else None
    except ValueError:
        return None


def pod_states(bodies: Iterable[Body]) -> dict[int, PodState]:
    """Member id → its pod's state, for the pods that are member pods (the last one listed of a
    member wins)."""
    pods: dict[int, PodState] = {}
    for body in bodies:
        state = PodState.of(body)
        if state is not None:
            pods[state.member] = state
    return pods


def pod_start_seconds(pods: Iterable[PodState]) -> float | None:
    """How long the app's pods take to start: the median over its Ready pods (None when none is)."""
    found = [p.start_seconds for p in pods if p.start_seconds is not None]
    return round(statistics.median(found), 1) if found else None


def _seconds(value: object) -> float | None:
    """An epoch-seconds annotation; one that does not parse reads as absent (the handoff restarts)."""
    try:
        return None if value is None else float(str(value))
    except ValueError:
        return None


def member_views(
    pods: Iterable[Body],
    members: Iterable[Body],
    zones: Mapping[str, str],
    wanted: int,
    capacities: Mapping[int, float] | None = None,
    parse: Callable[[Body], StreamAppMemberStatus] | None = None,
    refused: frozenset[int] = frozenset(),
) -> list[MemberView]:
    """One view per member that has a pod, a StreamAppMember, or an id below `wanted`; `capacities`
    overrides what the pods' CPU requests say for the members it names (`spec.executor.memberCapacity`);
    `parse` reads a member's report (`member_status`, or a memo of it: `controller.memo`). A wanted
    member without a pod is returning (this reconcile creates it) unless the API server `refused` its
    pod at the last try (a namespace quota, say): then nothing brings it back soon."""
    parse = parse or member_status
    pod_by_id: dict[int, PodState] = {}
    for body in pods:
        state = PodState.of(body)
        if state is not None and (state.member not in pod_by_id or not state.terminating):
            pod_by_id[state.member] = state
    members = [m for m in members if "spec" in m]
    status_by_id = {int(m["spec"]["memberId"]): parse(m) for m in members}
    acked_by_id = {int(m["spec"]["memberId"]): acked_generation(m) for m in members}
    ids = sorted(set(pod_by_id) | set(status_by_id) | set(range(wanted)))
    overrides = capacities or {}
    committed = committed_offsets(status_by_id.values())
    return [
        _view(
            i,
            pod_by_id.get(i),
            status_by_id.get(i, _NO_REPORT),
            acked_by_id.get(i, 0),
            zones,
            overrides.get(i),
            i < wanted and i not in refused,
            committed,
        )
        for i in ids
    ]


def committed_offsets(statuses: Iterable[StreamAppMemberStatus]) -> dict[int, int]:
    """Per task, the furthest input offset any report says its owner committed: an active copy's
    applied offset, or a copy's applied offset plus its lag (the owner's position as the copy last
    read it). A report from a lost owner still counts: its last commit is where its task stands. A
    packed report carries no positions: its tasks count only through other members' rows."""
    committed: dict[int, int] = {}
    for status in statuses:
        for report in status.tasks:
            if report.applied_offset is None:
                continue
            end = report.applied_offset + (0 if report.role == "active" else report.lag or 0)
            committed[report.task] = max(end, committed.get(report.task, end))
    return committed


def batch_running_since(
    pods: Iterable[Body],
    members: Iterable[Body],
    parse: Callable[[Body], StreamAppMemberStatus] | None = None,
) -> dict[int, float]:
    """Per member whose current pod reported a batch round running for a while
    (`batchRunningSince`), when that round began: what `rebalance.stuck` replaces members by. A
    report from an earlier pod or process says nothing about the current one."""
    parse = parse or member_status
    pod_by_id = {
        state.member: state
        for body in pods
        if (state := PodState.of(body)) is not None and not state.terminating
    }
    running: dict[int, float] = {}
    for body in members:
        if "spec" not in body:
            continue
        member = int(body["spec"]["memberId"])
        status = parse(body)
        pod = pod_by_id.get(member)
        since = epoch_seconds(status.batch_running_since)
        if pod is not None and since is not None and pod.made(status.pod_uid, status.started_at):
            running[member] = since
    return running


def member_status(body: Body) -> StreamAppMemberStatus:
    """A member's report, read with the model the executor wrote it with (`api.member`); one that
    does not parse counts as no report (and is logged): a report must never stop the app's reconcile."""
    try:
        return StreamAppMemberStatus.from_dict(body.get("status") or {}, served=True)
    except ValidationError as error:
        name = (body.get("metadata") or {}).get("name")
        log.warning("ignoring the unreadable status of member %s: %s", name, error)
        return _NO_REPORT


def _view(
    member: int,
    pod: PodState | None,
    status: StreamAppMemberStatus,
    acked: int,
    zones: Mapping[str, str],
    capacity: float | None,
    recreated: bool,
    committed: Mapping[int, int],
) -> MemberView:
    """`recreated`: whether a missing pod of the member is being created again (it is wanted, and the
    API server did not refuse it). Local state the member keeps of tasks it does not run counts among
    its lags as the input since (`committed`: `committed_offsets`), as the design wants of every task
    the member has local state of: its restore there is that delta, not the task's whole state."""
    alive = pod is not None and (pod.alive or pod.draining)
    fresh = pod is not None and pod.made(status.pod_uid, status.started_at)
    reports = status.tasks
    lags = {t.task: t.lag for t in reports if fresh and t.lag is not None}
    running = {t.task for t in reports}
    for kept in status.local_copies if fresh else ():
        if kept.task not in running and (end := committed.get(kept.task)) is not None:
            lags[kept.task] = max(0, end - kept.applied_offset)
    zone = zones.get(pod.node) if pod is not None and pod.node else None
    return MemberView(
        id=member,
        alive=alive,
        zone=zone,
        capacity=member_capacity(pod.capacity if pod is not None else None, capacity),
        lags=lags,
        acked_generation=acked,
        store_epochs=store_epochs(reports),
        fenced=frozenset(t.task for t in reports if fresh and t.role == "active" and t.fenced_by),
        retiring=pod is not None and pod.draining,
        returning=pod.returning if pod is not None else recreated,
        restore_rows={t.task: max(0, t.restore_rows) for t in reports if t.restore_rows is not None},
        restore_rate=status.restore_rate,
        reported=fresh,
        stopping=pod is not None and pod.terminating and not alive,
        replaced=pod is not None and pod.restarted and not pod.stuck,
    )


def store_epochs(reports: Iterable[TaskReport]) -> dict[int, int]:
    """Per task, the highest epoch a member's reports say the store has seen (storeEpoch, fencedBy).
    An epoch above `MAX_EPOCH` (or below 0) is not believed: no store reaches it by counting takeovers,
    and handing out one above it would overflow the API's int64 and fail every member write."""
    seen: dict[int, int] = {}
    for report in reports:
        for epoch in (report.store_epoch, report.fenced_by):
            if epoch is None:
                continue
            if not 0 <= epoch <= MAX_EPOCH:
                log.warning("ignoring task %d's reported store epoch %d: out of range", report.task, epoch)
                continue
            seen[report.task] = max(seen.get(report.task, 0), epoch)
    return seen
