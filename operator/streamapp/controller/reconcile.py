"""One reconcile of one app: parse → decide → act, persisting the intent first (the imperative shell).

Order matters for crash safety: the engine's new assignment is written to the StreamApp status
before any member spec, pod or volume changes, so an operator killed at any point restarts from
an intent that is at least as new as anything it did. Every step is idempotent and recomputed from
what is observed, never from what the previous reconcile believed.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from kubernetes.client.exceptions import ApiException

from streamapp.api.fields import ValidationError
from streamapp.api.member import StreamAppMemberSpec, TargetTooLarge
from streamapp.api.meta import ObjectMeta
from streamapp.api.names import member_name, state_claim_name
from streamapp.api.streamapp import StreamApp, StreamAppStatus
from streamapp.controller import children, claims, enact, handover, servicejoins, supporting
from streamapp.controller.acknowledgement import acked_generation, target_generation
from streamapp.controller.admission import STRICT, PodPolicy, admit, admit_metadata
from streamapp.controller.decision import Decision, decide
from streamapp.controller.kube import EVENT_MESSAGE_LIMIT, Kube, NameConflict, server_message
from streamapp.controller.memo import Memo
from streamapp.controller.metrics import Metrics
from streamapp.controller.observe import Observed, PodState, pod_states
from streamapp.controller.status import (
    RECONCILE_FAILED,
    failing_status,
    invalid_spec_status,
    moved,
    status_changes,
    step_patch,
    stored_conditions,
)
from streamapp.rebalance import AppConfig, Assignment, Event, EventKind, LostMember, MemberView, Plan
from streamapp.rebalance.autoscaler import ScaleDecision

log = logging.getLogger(__name__)
INTENT_REBUILT = "IntentRebuilt"
NAME_CONFLICT = "NameConflict"
POD_REFUSED = "PodRefused"
TARGET_TOO_LARGE = "TargetTooLarge"
CLAIM_REFUSED = "ClaimRefused"
SERVICE_JOIN_REFUSED = "ServiceJoinRefused"
SCALED_OUT = "ScaledOut"
SCALED_IN = "ScaledIn"
SCALE_OUT_INEFFECTIVE = "ScaleOutIneffective"
BLOCKED_RETRY_SECONDS = 30.0
"""A name taken by someone else, or a pod the API server refuses, stays so until a person acts; the
watches wake the loop when the app or its children change, so a slow retry costs nothing."""
HANDOVER_RETRY_SECONDS = 1.0
"""How soon a step whose new owners wait on a lost member's acknowledgement looks again (the member's
report wakes it sooner)."""
WRITERS = 8
"""Member targets written at once (the official client's connection pool holds 5 per core)."""
Body = Mapping[str, Any]


@dataclass(frozen=True)
class Outcome:
    """When to look again (epoch seconds, None: only on events) and the app as last written."""

    wake_at: float | None
    app: Body | None


def reconcile(
    kube: Kube,
    observed: Observed,
    now: float,
    metrics: Metrics,
    policy: PodPolicy = STRICT,
    memo: Memo | None = None,
) -> Outcome:
    """Bring one app one step closer to its plan; `policy` says what its pod template may ask for,
    `memo` what the app's previous reconcile computed that this one may reuse (`controller.memo`).

    The body is parsed here, once; what follows reads the typed app (`controller.decision`)."""
    memo = memo or Memo()
    started = time.perf_counter()
    observed = observed.owned()
    try:
        app = StreamApp.from_resource(observed.app)
        admit(app, policy)
        admit_metadata(app)
    except ValueError as error:
        return _refuse(kube, observed.app, str(error), now)
    decision = decide(app, observed, now, memo, partial(_timed_plan, memo, metrics))
    outcome = _act(kube, decision, observed, now, metrics, memo)
    metrics.reconcile_seconds.observe(time.perf_counter() - started)
    return outcome


def _timed_plan(
    memo: Memo,
    metrics: Metrics,
    config: AppConfig,
    views: Sequence[MemberView],
    previous: Assignment,
    now: float,
) -> Plan:
    """The memo's plan, its duration recorded (`streamapp_plan_seconds`)."""
    started = time.perf_counter()
    result = memo.plan(config, views, previous, now)
    metrics.plan_seconds.observe(time.perf_counter() - started)
    return result


def _refuse(kube: Kube, body: Body, error: str, now: float) -> Outcome:
    """A body the models or the admission rules refuse: nothing is planned and no child is touched;
    the condition (and one Event per change of it, not one per resync) says why. Only the envelope
    is read: the metadata and the stored conditions."""
    meta = ObjectMeta.from_dict(body.get("metadata") or {})
    stored = body.get("status") or {}
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    refused = invalid_spec_status(meta, stored_conditions(stored), error, stamp)
    if all(stored.get(key) == value for key, value in refused.items()):
        return Outcome(None, None)
    kube.event(meta, "InvalidSpec", error, warning=True)
    return Outcome(
        None, kube.patch_app_status(str(meta.namespace), meta.name, refused, meta.resource_version)
    )


def _act(
    kube: Kube, decision: Decision, observed: Observed, now: float, metrics: Metrics, memo: Memo
) -> Outcome:
    """Write what `decision` says, in the order that keeps a crash safe: the status (with the intent)
    first, then its Events, the supporting objects, the member targets (givers first), and the pods."""
    app, result, step, pods = decision.app, decision.plan, decision.step, decision.pods
    meta = app.metadata
    namespace, name = str(meta.namespace), meta.name
    if decision.rebuilt is not None:
        kube.event(meta, INTENT_REBUILT, decision.rebuilt, warning=True)
        log.warning("%s/%s: %s", namespace, name, decision.rebuilt)
    metrics.observe_input_lag({"namespace": namespace, "app": name}, decision.status.input_lag)
    written = _write_status(kube, app, decision.status)
    # The status holds the step's decision (its intent, each lost member's choice), so its Events go
    # out now: a later write that fails (a member target refused, a 409 from a report written
    # meanwhile) makes the next step decide the same from that status, and it would announce nothing.
    _report(kube, app, result, decision.previous, decision.views, metrics)
    _autoscale(kube, app, decision.scale, metrics)
    try:
        _repair_supporting(kube, app, result, observed, memo)
        thresholds = decision.config.rebalance.lag_thresholds()
        waited = _write_member_specs(
            kube,
            app,
            result,
            observed.members,
            decision.handing_off,
            memo,
            thresholds,
            previous=decision.previous,
            pods=pods,
            now=now,
        )
        if waited:
            log.info("%s/%s: new owners wait for lost members %s to acknowledge", namespace, name, waited)
        foreign = _claims_refused(kube, app)
        if foreign is not None:
            raise ClaimRefused(foreign)
        intrusion = _services_joined(kube, app, decision.revision, memo)
        if intrusion is not None:
            raise ServiceJoinRefused(intrusion)
        refusal = _pod_admitted(kube, app, decision.revision, memo)
        if refusal is not None:
            raise PodRefused(refusal)
        enact.rollout(kube, name, namespace, step, pods)
        enact.announce(kube, meta, step, pods, decision.owned)
        _manage_pods(kube, app, decision.config, result, pods, observed.members)
        memo.refused = frozenset()
    except (NameConflict, PodRefused, TargetTooLarge) as blocked:
        # Shown from the next reconcile's status on (this one's is written); an Event when it is new.
        # Nothing else is touched meanwhile: no pod is created or deleted, running ones keep running
        # (a create refused by the server comes after the other members' pods were made).
        # A member target too large for etcd is refused before any member is written, so no wave of
        # a handoff goes out without the other.
        reason = (
            NAME_CONFLICT
            if isinstance(blocked, NameConflict)
            else TARGET_TOO_LARGE
            if isinstance(blocked, TargetTooLarge)
            else CLAIM_REFUSED
            if isinstance(blocked, ClaimRefused)
            else SERVICE_JOIN_REFUSED
            if isinstance(blocked, ServiceJoinRefused)
            else POD_REFUSED
        )
        memo.refused = blocked.members if isinstance(blocked, PodCreateRefused) else memo.refused
        if memo.blocked != (reason, str(blocked)):
            kube.event(meta, reason, str(blocked), warning=True)
        memo.blocked = (reason, str(blocked))
        return Outcome(now + BLOCKED_RETRY_SECONDS, written)
    if memo.blocked is not None:
        memo.blocked = None
        return Outcome(now, written)  # write the conditions without it at once
    scale_wake = decision.scale.wake_at if decision.scale is not None else None
    handover_wake = now + HANDOVER_RETRY_SECONDS if waited else None
    wake = [w for w in (result.wake_at, step.wake_at, scale_wake, handover_wake) if w is not None]
    return Outcome(min(wake, default=None), written)


class PodRefused(RuntimeError):
    """The API server refuses the member pod the current spec renders (a server-side dry run)."""


class PodCreateRefused(PodRefused):
    """The API server refuses to create a member's pod or claim although the dry run passed (a
    namespace quota counts only what exists); `members`: every member refused so."""

    def __init__(self, message: str, members: frozenset[int] = frozenset()) -> None:
        super().__init__(message)
        self.members = members


class ClaimRefused(PodRefused):
    """The pod template mounts a claim that is another app's, member's or controller's."""


class ServiceJoinRefused(PodRefused):
    """The pod template's labels would put member pods behind another app's Service."""


def _claims_refused(kube: Kube, app: StreamApp) -> str | None:
    """Why the claims the pod template mounts may not be mounted (`controller.claims`), read at every
    reconcile that may create a pod: a claim's owner can change, and only apps whose template names
    claims pay for the reads."""
    namespace = str(app.metadata.namespace)
    names = {name for _, name in claims.mounted_claims(app)}
    return claims.refusal(app, {name: kube.read_claim(namespace, name) for name in names})


def _services_joined(kube: Kube, app: StreamApp, revision: str, memo: Memo) -> str | None:
    """Why the template's labels may not reach the pods of this revision (`controller.servicejoins`),
    or None: the namespace's Services are read once per revision, and only for a template with labels."""
    if memo.joins is not None and memo.joins[0] == revision:
        return memo.joins[1]
    selectors = (
        kube.service_selectors(str(app.metadata.namespace)) if servicejoins.template_labels(app) else {}
    )
    memo.joins = (revision, servicejoins.joined(app, revision, selectors))
    return memo.joins[1]


def _pod_admitted(kube: Kube, app: StreamApp, revision: str, memo: Memo) -> str | None:
    """Why the API server refuses the member pod of this revision, or None: a server-side dry run of
    member 0's pod, once per revision (`memo.admitted`), before any pod of it is created or an old
    one deleted for it. What the operator's own rules let through (or everything, with
    --allow-privileged-pod-templates) can still be refused by Pod Security admission, a LimitRange or
    a webhook; asked first, the refusal is the app's condition instead of a pod create failing on
    every reconcile, or a rollout deleting pods it cannot replace."""
    if memo.admitted is not None and memo.admitted[0] == revision:
        return memo.admitted[1]
    body = children.pod(app, 0)
    body["metadata"] = {**body["metadata"], "generateName": f"{body['metadata']['name']}-dryrun-"}
    del body["metadata"]["name"]
    refused = kube.dry_run_pod(str(app.metadata.namespace), body)
    message = None if refused is None else f"the API server refuses the member pod: {refused}"
    memo.admitted = (revision, message)
    return message


def _write_status(kube: Kube, app: StreamApp, status: StreamAppStatus) -> Body | None:
    """Patch only the status fields that differ from the app's as read, and nothing when none does.

    A member report usually changes one aggregate (`inputLag`) or nothing the app shows: sending the
    whole status (the intent, 1,000 member rows) for it would make every report of every member cost
    the API server and etcd a rewrite of the largest object. Returns the app as written, or None.
    """
    changed = status_changes(app.status.to_dict(), step_patch(status))
    if not changed:
        return None
    meta = app.metadata
    return kube.patch_app_status(str(meta.namespace), meta.name, changed, meta.resource_version)


def _repair_supporting(kube: Kube, app: StreamApp, result: Plan, observed: Observed, memo: Memo) -> None:
    """Service, PDB and the identity of every member that is wanted, holds tasks or has a pod —
    before any pod is created, since a pod names its member's ServiceAccount."""
    holding = set(range(app.spec.replicas)) | set(memo.member_targets(result.assignment))
    members = (holding - set(result.removable)) | set(pod_states(observed.pods))
    want = supporting.wanted(app, members)
    enact.repairs(kube, str(app.metadata.namespace), supporting.repairs(want, observed.supporting))


def report_failure(kube: Kube, body: Body, error: str, now: float) -> Body | None:
    """Surface a reconcile that keeps failing: the Degraded condition says ReconcileFailed with the
    error, and a Warning Event is posted when that message is new. Returns the app as written.

    The reconcile may have failed before its parse, so only the envelope is read: the metadata and
    the stored conditions. Like every status write, it is conditional on the app as read (its
    resourceVersion): the conditions it keeps are those it read, and a blind write would put back ones
    someone else had changed since."""
    meta = ObjectMeta.from_dict(body.get("metadata") or {})
    stored = stored_conditions(body.get("status") or {})
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    patch = failing_status(meta, stored, error, stamp)
    shown = next((c.message for c in stored if c.type == "Degraded"), None)
    message = next(str(c["message"]) for c in patch["conditions"] if c["type"] == "Degraded")
    if shown == message:
        return None
    kube.event(meta, RECONCILE_FAILED, message, warning=True)
    return kube.patch_app_status(str(meta.namespace), meta.name, patch, meta.resource_version)


def _write_member_specs(
    kube: Kube,
    app: StreamApp,
    result: Plan,
    members: Iterable[Body],
    retiring: frozenset[int],
    memo: Memo | None = None,
    lag_thresholds: tuple[int, ...] = (),
    previous: Assignment | None = None,
    pods: Mapping[int, PodState] | None = None,
    now: float = 0.0,
) -> tuple[int, ...]:
    """Write each member's target where it changed, with `retiring` set for the members handing off
    and the app's `lag_thresholds` (which copy lags its executor reports at once); create the
    StreamAppMember when missing. The writes go out side by side (`side_by_side`): a step of a large
    rebalance touches hundreds of members, and one at a time they held the reconcile, and with it the
    next step, for as many round trips to a busy API server.

    In two waves, though: first the members that give up an active task (or hold it at another
    epoch), then the rest. A plan can take a task from a lost member and give it to another at the
    next epoch in one step (a restore elsewhere, a standby's failover, a reservation expired); written
    together, a reader of the members — an executor whose pod comes back, an observer — could find
    the new owner's target while the old one's still names the task active at the older epoch. If the
    first wave fails, the second is not written: the new epoch waits for the next reconcile.

    Who gives up is judged from the plan's `previous` assignment as well as from the members as
    watched: the watch can lag behind the operator's own last writes (a new leader's cache, a write
    made just before a restart), and a member it still shows without the task — while its stored
    target names it active — would otherwise be skipped as unchanged or written beside the new owner,
    and a restarting executor would read the older target (seen in the chaos run). Every
    target is rendered before the first write, so one too large for etcd even packed
    (`TargetTooLarge`) stops the step before either wave.

    A member whose pod is not alive is written only at the version the plan saw it at, and while one
    of them has a process that may still run an older target, no member is told of a task it takes up
    (`controller.handover`); returns the members waited on (empty when nothing waits)."""
    name, namespace = app.metadata.name, str(app.metadata.namespace)
    memo = memo or Memo()
    existing = {int(m["spec"]["memberId"]): m for m in members if "spec" in m}
    targets = memo.member_targets(result.assignment)
    replicas = app.spec.replicas
    givers = _giving_up(previous, result.assignment) if previous is not None else set()
    pods = pods or {}
    # (member, its object, its new target, whether its target drops an ownership it holds now)
    planned: list[tuple[int, Body | None, dict[str, Any], bool]] = []
    for member in sorted(set(range(replicas)) | set(targets) | set(existing)):
        generation = result.assignment.generation
        target = targets.get(member)
        wanted = memo.member_spec(name, member, target, generation, member in retiring, lag_thresholds)
        current = existing.get(member)
        if current is None:
            if member < replicas or member in targets:
                planned.append((member, None, wanted, False))
        elif member in givers or not children.same_target(current["spec"], wanted):
            planned.append((member, current, wanted, _gives_up(current["spec"], wanted)))
    dropping = {member for member, _, _, drops in planned if drops}
    waited = handover.waiting_on(
        (
            (
                member,
                pods.get(member),
                memo.report(body),
                acked_generation(body),
                target_generation(body),
                member in dropping,
            )
            for member, body in existing.items()
            if handover.conditional(pods.get(member))
        ),
        now,
    )
    releasing: list[Callable[[], None]] = []
    writes: list[Callable[[], None]] = []
    for member, current, wanted, drops in planned:
        if waited and member not in waited and handover.takes_up(current and current.get("spec"), wanted):
            continue  # told once the lost members it waits on acknowledged their targets
        if current is None:
            writes.append(partial(kube.create_member, namespace, children.member_object(app, member, wanted)))
            continue
        meta = current.get("metadata") or {}
        version = meta.get("resourceVersion") if handover.conditional(pods.get(member)) else None
        (releasing if drops or member in givers else writes).append(
            partial(
                kube.patch_member_spec,
                namespace,
                member_name(name, member),
                wanted,
                uid=str(meta.get("uid") or ""),
                version=str(version) if version else None,
            )
        )
    side_by_side(releasing)
    side_by_side(writes)
    return waited


def _giving_up(previous: Assignment, planned: Assignment) -> set[int]:
    """The members that held a task active in `previous` at an epoch `planned` no longer gives them."""
    return {
        before.active
        for before, after in zip(previous.tasks, planned.tasks, strict=False)
        if before.active is not None and (before.active, before.epoch) != (after.active, after.epoch)
    }


def _gives_up(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether a member's new spec drops an ownership (task at an epoch) its current one holds; a
    current spec that does not parse counts as holding anything."""
    try:
        held = StreamAppMemberSpec.from_dict(current, served=True).held()
    except ValidationError:
        return True
    return bool(held - StreamAppMemberSpec.from_dict(wanted).held())


def side_by_side(writes: Sequence[Callable[[], None]], threads: int = WRITERS) -> None:
    """Make independent writes on up to `threads` threads at once; every one is attempted, then the
    first failure (in the order given) is raised, as if they had run one after the other."""
    if len(writes) < 2:
        for write in writes:
            write()
        return
    with ThreadPoolExecutor(min(threads, len(writes)), thread_name_prefix="write") as pool:
        done = [pool.submit(write) for write in writes]
    failures = [error for future in done if (error := future.exception()) is not None]
    if failures:
        raise failures[0]


def _manage_pods(
    kube: Kube,
    app: StreamApp,
    config: AppConfig,
    result: Plan,
    pods: Mapping[int, PodState],
    members: Iterable[Body],
) -> None:
    """Replace missing pods of wanted members at once; remove drained members completely.

    A pod that ran to an end (an eviction leaves it Failed) is deleted so the next reconcile
    replaces it; its member counts as lost meanwhile. So is the pod of a member the plan says let a
    revocation time out: only once that pod is seen gone does the engine hand its tasks on.

    A member whose pod or claim the API server refuses (a namespace quota, a LimitRange, an
    admission webhook: 4xx) does not hold up the others: every other member's pod is still created
    and drained members still removed, then the first refusal is raised as `PodCreateRefused`, which
    blocks the app like a refused dry run (Degraded/PodRefused with the server's message, one Event
    while it stays the same, a retry every `BLOCKED_RETRY_SECONDS` or wake), while the member —
    without a pod — is lost to the engine like any other.
    """
    name, namespace = app.metadata.name, str(app.metadata.namespace)
    refused: list[tuple[int, PodCreateRefused]] = []
    for member in result.timed_out:
        late = pods.get(member)
        if late is not None and not late.terminating:
            kube.delete_pod(namespace, late.name, uid=late.uid)
    for member in range(config.replicas):
        pod = pods.get(member)
        if pod is not None and pod.finished and not pod.terminating:
            kube.delete_pod(namespace, pod.name, uid=pod.uid)
        if pod is None:
            claim = children.state_claim(app, member)
            bodies = ([claim] if claim is not None else []) + [children.pod(app, member)]
            for body in bodies:  # no pod without its claim
                refusal = _create_member_child(kube, app, member, body)
                if refusal is not None:
                    refused.append((member, refusal))
                    break
    member_uids = {
        int(m["spec"]["memberId"]): str((m.get("metadata") or {}).get("uid") or "")
        for m in members
        if "spec" in m
    }
    retain = app.spec.executor.storage.retain_on_scale_in
    for member in result.removable:
        if member in pods and not pods[member].terminating:
            kube.delete_pod(namespace, member_name(name, member), uid=pods[member].uid)
        if member not in pods:
            if member in member_uids:
                kube.delete_member(namespace, member_name(name, member), uid=member_uids[member])
            if not retain:
                kube.delete_claim(namespace, state_claim_name(name, member), str(app.metadata.uid))
    if refused:
        raise PodCreateRefused(str(refused[0][1]), frozenset(member for member, _ in refused))


def _create_member_child(
    kube: Kube, app: StreamApp, member: int, body: dict[str, Any]
) -> PodCreateRefused | None:
    """Create a member's pod or claim; the refusal when the API server refuses it (4xx), raised
    by the caller once the other members are done. A server error stops the step at once."""
    try:
        kube.create(str(app.metadata.namespace), body)
    except ApiException as error:
        if error.status is None or not 400 <= error.status < 500:
            raise
        kind = body["kind"]
        log.warning(
            "%s/%s: member %d's %s refused: %s",
            app.metadata.namespace,
            app.metadata.name,
            member,
            kind,
            error.reason,
        )
        return PodCreateRefused(
            f"the API server refuses member {member}'s {kind}: {error.status} {server_message(error)}"
        )
    return None


_EVENT_NAMES: Mapping[str, str] = {"TasksAssigned": "TasksReassigned"}


def _report(
    kube: Kube,
    app: StreamApp,
    result: Plan,
    previous: Assignment,
    views: Sequence[MemberView],
    metrics: Metrics,
) -> None:
    """Kubernetes Events and Prometheus metrics for what this step decided."""
    meta = app.metadata
    labels = {"namespace": str(meta.namespace), "app": meta.name}
    for kind, group in _by_kind(result.events).items():
        message = _joined([event.describe() for event in group], EVENT_MESSAGE_LIMIT)
        kube.event(meta, _EVENT_NAMES.get(kind.value, kind.value), message, warning=group[0].warning)
    _announce_lost(kube, app, result.lost)
    if result.changed:
        metrics.rebalances.labels(**labels).inc()
        metrics.task_movements.labels(**labels).inc(moved(previous, result.assignment))
    metrics.observe_assignment(labels, result.assignment, views)
    metrics.observe_lost(labels, result.lost)
    metrics.fenced_tasks.labels(**labels).set(len(result.fenced))


def _autoscale(kube: Kube, app: StreamApp, decision: ScaleDecision | None, metrics: Metrics) -> None:
    """Carry out the autoscaler's decision, once the status holding it (and what it will wait for) is
    written: its replicas through /scale, an Event saying why, and a Warning when it found its last
    scale-out did not raise throughput."""
    meta = app.metadata
    labels = {"namespace": str(meta.namespace), "app": meta.name}
    metrics.observe_autoscaler(labels, decision)
    if decision is None:
        return
    if decision.ineffective:
        kube.event(meta, SCALE_OUT_INEFFECTIVE, decision.reason[:EVENT_MESSAGE_LIMIT], warning=True)
    if decision.replicas == app.spec.replicas:
        return
    kube.scale_app(str(meta.namespace), meta.name, decision.replicas)
    metrics.autoscaler_decisions.labels(**labels, action=decision.action).inc()
    reason = SCALED_OUT if decision.replicas > app.spec.replicas else SCALED_IN
    kube.event(meta, reason, decision.reason[:EVENT_MESSAGE_LIMIT])


LOST_TASK_EVENTS: Mapping[str, str] = {"Wait": "WaitingForMember", "Restore": "RestoringElsewhere"}


def _announce_lost(kube: Kube, app: StreamApp, lost: Iterable[LostMember]) -> None:
    """A Normal Event per lost member whose choice changed since the app's status last showed it
    (`lostTasks`: waiting for it, or restoring how many of its tasks elsewhere), saying why."""
    shown = {row.id: row.lost_tasks for row in app.status.members}
    for member in lost:
        before = shown.get(member.member)
        was = None if before is None else (before.choice, before.held, before.restoring)
        if was != (member.choice, len(member.held), len(member.restoring)):
            kube.event(
                app.metadata, LOST_TASK_EVENTS[member.choice], f"member {member.member}: {member.reason}"
            )


def _by_kind(events: Iterable[Event]) -> dict[EventKind, list[Event]]:
    """The step's events grouped by kind, in order of first appearance: one Kubernetes Event per kind
    and step, since a step of a large app touches hundreds of members and one request each held its
    reconcile for tens of seconds (bench/results/apiscale.md)."""
    groups: dict[EventKind, list[Event]] = {}
    for event in events:
        groups.setdefault(event.kind, []).append(event)
    return groups


def _joined(parts: list[str], limit: int) -> str:
    """`parts` joined by "; ", as many as fit in `limit` characters with a note of how many did not."""
    text = parts[0] if parts else ""
    for index in range(1, len(parts)):
        candidate = f"{text}; {parts[index]}"
        left = len(parts) - index - 1
        if len(candidate) + (len(f"; and {left} more") if left else 0) > limit:
            return f"{text}; and {len(parts) - index} more"[:limit]
        text = candidate
    return text[:limit]
