"""Rolling updates in the operator: observed pods in, the rollout's step and its writes out (pure).

The decisions are `rebalance.rollout.rollout_step` (pure); this module reads the pods' revision label
and handoff annotation into it, marks members that hand off as retiring for the engine (and, with
those whose pod someone else deletes, for their executors), says which pods to delete and where to
persist when a handoff began on the pod itself (`pod_writes`: a restarted operator then neither restarts
nor forgets its timeout; `enact` makes the writes), and reports the rollout in the status: `updatedReplicas`, `currentRevision`, `updateRevision` and the
`Progressing` condition, which (like an Event when it is chosen) says which way each member goes and why.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from streamapp.api.conditions import ConditionType
from streamapp.api.names import member_name
from streamapp.api.streamapp import StreamAppStatus
from streamapp.controller.observe import PodState
from streamapp.controller.status import Condition
from streamapp.rebalance import Assignment, MemberView
from streamapp.rebalance.costs import Costs
from streamapp.rebalance.rollout import MemberPod, RolloutConfig, RolloutStep, settled_step
from streamapp.rebalance.stuck import replace_stuck

PROGRESSING: ConditionType = "Progressing"
STRATEGY_CHOSEN = "RolloutStrategyChosen"
MEMBER_STUCK = "MemberStuck"
STUCK_GRACE_SECONDS = 5
"""A stuck member's pod grace period: its executor cannot finish the round it is stuck in, so the
pod's full grace period would only keep its tasks down longer (they are released once the pod is gone,
its process killed)."""
MESSAGE_LIMIT = 2000


def step(
    pods: Mapping[int, PodState],
    replicas: int,
    revision: str,
    previous: Assignment,
    config: RolloutConfig,
    now: float,
    warm: bool,
    costs: Costs,
    views: Sequence[MemberView] = (),
    running_since: Mapping[int, float] | None = None,
    batch_timeout: float = 0.0,
) -> RolloutStep:
    """The rollout's next step from the pods as observed and the persisted assignment's owners;
    `warm`: the app's protocol warms successors before a handoff; `costs`: what `auto` weighs;
    `views`: the members as observed — whose current pod has reported (one that never did has
    nothing to hand off) and whether the assignment is at rest (the next member waits until it is).
    Within the same `maxUnavailable`, members whose batch round has run `batch_timeout` since
    `running_since` (`observe.batch_running_since`) are replaced (`rebalance.stuck`)."""
    silent = {v.id for v in views if not v.reported}
    observed = {
        m: MemberPod(m, p.revision, p.alive, p.handoff_since, p.ready_since, m not in silent)
        for m, p in pods.items()
        if not p.terminating
    }
    rolled = settled_step(observed, replicas, revision, config, now, warm, costs, previous, views)
    stuck = running_since or {}
    return replace_stuck(rolled, observed, stuck, replicas, batch_timeout, config.max_unavailable, now)


def mark_retiring(views: Iterable[MemberView], rollout: RolloutStep) -> list[MemberView]:
    """Members handing off are retiring: the engine hands their tasks over and gives them nothing new.
    A member whose pod this step deletes (a restart in place) is planned as the next reconcile will
    see it, not alive and returning (the operator re-creates its pod): its tasks are held for its new
    pod, or restored elsewhere if that is measured to be quicker (`rebalance.recovery`); its loss is
    planned (`replaced`): no flap, and no insurance copies — unless its executor is stuck, a failure.
    Marked retiring instead, it had its tasks revoked and moved cold by the cooperative and eager
    protocols in the very step that restarts it, and warm handoffs started under streamapp, wasted when
    the pod came back (bench/results/cluster-notes.md). A member the rollout hands off next is `upcoming`: copies of its
    tasks warm ahead (`rebalance.upcoming`)."""
    marked = []
    for view in views:
        if view.id in rollout.retiring:
            view = dataclasses.replace(view, retiring=True)
        elif view.id in rollout.upcoming:
            view = dataclasses.replace(view, upcoming=True)
        elif view.id in rollout.delete:
            planned = view.id not in rollout.stuck
            view = dataclasses.replace(view, alive=False, returning=True, replaced=planned)
        marked.append(view)
    return marked


def handing_off(views: Iterable[MemberView], rollout: RolloutStep) -> frozenset[int]:
    """Members whose executor is told it is retiring (finish the handoff on SIGTERM): those a rollout
    hands off and those whose pod someone else is deleting (already `retiring` in their view) — never
    one whose pod the rollout deletes for a restart in place, whose tasks wait for its new pod."""
    return frozenset(rollout.retiring) | frozenset(v.id for v in views if v.retiring)


@dataclass(frozen=True)
class PodWrite:
    """One write the rollout makes to a member's pod: delete it (with `grace_seconds`, `stuck` when its
    executor is), or set its handoff mark to `handoff` (None clears it)."""

    name: str
    uid: str
    delete: bool = False
    grace_seconds: int | None = None
    stuck: bool = False
    handoff: str | None = None


def pod_writes(app: str, rollout: RolloutStep, pods: Mapping[int, PodState]) -> list[PodWrite]:
    """Persist handoff starts on the pods, clear abandoned ones (a paused rollout), delete the pods
    the rollout replaces (the next reconcile creates them from the current spec) — a stuck member's
    within `STUCK_GRACE_SECONDS`: its executor cannot finish its round, so waiting out its grace period
    only keeps its tasks down longer."""
    writes = []
    for member, pod in sorted(pods.items()):
        if pod.terminating:
            continue
        since = rollout.retiring.get(member)
        if member in rollout.delete:
            stuck = member in rollout.stuck
            grace = STUCK_GRACE_SECONDS if stuck else None
            writes.append(PodWrite(member_name(app, member), pod.uid, True, grace, stuck))
        elif since is not None and pod.handoff_since != since:
            writes.append(PodWrite(pod.name, pod.uid, handoff=_stamp(since)))
        elif since is None and pod.handoff_since is not None:
            writes.append(PodWrite(pod.name, pod.uid))
    return writes


def events(
    rollout: RolloutStep, pods: Mapping[int, PodState], active: Mapping[int, int]
) -> list[tuple[str, str, bool]]:
    """(reason, message, warning) of the Events of this step: one naming the members whose way was
    chosen — a handoff that starts, a pod deleted for a restart in place or after its handoff — and
    why, nothing while handoffs go on; a Warning for members replaced because their executor is stuck."""
    chosen = [
        describe(m, rollout, active)
        for m in sorted(rollout.reasons)
        if m not in rollout.stuck and (m in rollout.delete or pods[m].handoff_since is None)
    ]
    stuck = [describe(m, rollout, active) for m in rollout.stuck]
    return [
        *([(STRATEGY_CHOSEN, "; ".join(chosen), False)] if chosen else []),
        *([(MEMBER_STUCK, "; ".join(stuck), True)] if stuck else []),
    ]


def describe(member: int, rollout: RolloutStep, active: Mapping[int, int]) -> str:
    """Which way a member goes and why, e.g. "member 2 restarts in place: measured restart 3.1 s <
    handoff 4.8 s" or "member 1 (4 tasks) hands off: its restart time is not measured yet"."""
    why = rollout.reasons[member]
    if member in rollout.stuck:
        return f"member {member} ({active.get(member, 0)} tasks) is replaced: {why}"
    if member in rollout.retiring:
        return f"member {member} ({active.get(member, 0)} tasks) hands off: {why}"
    return f"member {member} restarts in place: {why}"


def with_revisions(
    status: StreamAppStatus, rollout: RolloutStep, revision: str, pods: Mapping[int, PodState]
) -> StreamAppStatus:
    """`status` with `updatedReplicas`, `updateRevision` and `currentRevision` (the revision most of
    the members not yet updated run; the update revision once none is left)."""
    behind = Counter(pods[m].revision for m in rollout.outdated)
    current = min(behind, key=lambda r: (-behind[r], r)) if behind else revision
    return dataclasses.replace(
        status, updated_replicas=rollout.updated, update_revision=revision, current_revision=current
    )


def progressing(rollout: RolloutStep, config: RolloutConfig, active: Mapping[int, int]) -> Condition:
    """True while member pods are being replaced; False when the rollout is complete or paused."""
    if not rollout.rolling:
        return Condition(PROGRESSING, False, "RolloutComplete", "every member runs the current spec")
    behind = f"{len(rollout.outdated)} member(s) still run an older spec"
    if config.paused:
        return Condition(PROGRESSING, False, "RolloutPaused", f"{behind}; rollingUpdate.paused is set")
    next_ = [f"member {m} hands off next: copies of its tasks warm ahead" for m in rollout.upcoming]
    message = "; ".join([behind, *(describe(m, rollout, active) for m in sorted(rollout.reasons)), *next_])
    return Condition(PROGRESSING, True, "RollingUpdate", message[:MESSAGE_LIMIT])


def owned(previous: Assignment) -> dict[int, int]:
    """Active tasks per member (revoking ones included)."""
    return dict(Counter(t.active for t in previous.tasks if t.active is not None))


def _stamp(seconds: float) -> str:
    return f"{seconds:.3f}"
