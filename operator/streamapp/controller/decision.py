"""What one reconcile decides for one app from what it observed (functional core).

`decide` takes the app as parsed (`StreamApp`, once, by `controller.reconcile`) and the children the
watches show, and returns a `Decision`: the intent the step starts from, the engine's plan, the
rollout's step, and the typed status to write. It writes nothing and reads no clock (`now` is given);
the app's `Memo` only keeps results it may reuse. `controller.reconcile` acts on the decision, in the
order that keeps a crash safe (docs/design.md, "One reconcile: parse, decide, act").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from streamapp.api.streamapp import StreamApp, StreamAppStatus
from streamapp.controller import children, costreports, intentrebuild, podrollout, scaling
from streamapp.controller.memo import Memo, Planner
from streamapp.controller.observe import (
    Body,
    Observed,
    PodState,
    batch_running_since,
    member_views,
    pod_states,
)
from streamapp.controller.status import Condition, app_status, foreign, merge_conditions
from streamapp.rebalance import AppConfig, Assignment, MemberView, Plan
from streamapp.rebalance.autoscaler import ScaleDecision
from streamapp.rebalance.rollout import RolloutStep


@dataclass(frozen=True)
class Decision:
    """One step for one app: what to write, and what the act reads to write it."""

    app: StreamApp
    config: AppConfig
    previous: Assignment
    """The intent the step starts from (as stored, or rebuilt from the members' targets)."""
    rebuilt: str | None
    """Why the stored intent was not used and was rebuilt from the members' targets, or None."""
    plan: Plan
    pods: Mapping[int, PodState]
    views: Sequence[MemberView]
    revision: str
    """The revision of the member pod the current spec renders."""
    step: RolloutStep
    handing_off: frozenset[int]
    """The members whose targets are marked retiring (handing their tasks off before a replacement)."""
    owned: Mapping[int, int]
    """Member id → active tasks it holds in the plan."""
    status: StreamAppStatus
    scale: ScaleDecision | None = None
    """The autoscaler's decision (spec.autoscaling enabled), whose replicas the act writes to /scale."""


def decide(
    app: StreamApp, observed: Observed, now: float, memo: Memo, planner: Planner | None = None
) -> Decision:
    """The step for `app` at `now`; `observed` holds only the app's own children (`Observed.owned`),
    and `planner` is the engine's plan (by default the memo's, which reuses a plan that cannot differ)."""
    config = app.spec.app_config()
    previous, rebuilt = previous_intent(app, observed.members, config.partitions, memo)
    pods = pod_states(observed.pods)
    revision = children.pod_revision(app)
    rolling = app.spec.rolling_update.config()
    measured = costreports.known(app.status, observed.members, pods, bool(app.spec.executor.storage.size))
    reports = memo.parse_reports(observed.members)
    views = member_views(
        observed.pods,
        observed.members,
        observed.zones,
        config.replicas,
        app.spec.executor.capacity_overrides(),
        reports,
        memo.refused,
    )
    views = costreports.with_restore_rates(views, measured)
    running = batch_running_since(observed.pods, observed.members, reports)
    step = podrollout.step(
        pods,
        config.replicas,
        revision,
        previous,
        rolling,
        now,
        config.rebalance.state_aware,
        measured,
        views,
        running,
        config.rebalance.batch_timeout,
    )
    handing_off = podrollout.handing_off(views, step)
    views = podrollout.mark_retiring(views, step)
    pod_start = measured.pod_start
    views = costreports.with_return_estimates(views, measured)
    plan = (planner or memo.plan)(config, views, previous, now)
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    digests = [memo.digest(member) for member in observed.members]
    status = app_status(app, plan, previous, views, pods, stamp, digests, memo.intent(plan.assignment))
    status = podrollout.with_revisions(status, step, revision, pods)
    status = costreports.with_costs(status, measured)
    owned = podrollout.owned(plan.assignment)
    generation = app.metadata.generation or 0
    stored = app.status.conditions
    progressing = merge_conditions(stored, [podrollout.progressing(step, rolling, owned)], stamp, generation)
    shown = status.conditions + progressing
    if memo.blocked is not None:
        blocked = Condition("Degraded", True, memo.blocked[0], memo.blocked[1][:1000])
        shown = tuple(c for c in shown if c.type != "Degraded") + merge_conditions(
            stored, [blocked], stamp, generation
        )
    status = replace(status, pod_start_seconds=pod_start, conditions=shown + foreign(stored))
    scale = None
    if app.spec.autoscaling.enabled:
        memo.rates.add(scaling.sample(now, observed.members, pods, reports))
        found = scaling.facts(app, plan.assignment, views, memo.rates, status.input_lag, pod_start, revision)
        scale = scaling.autoscale(app, found, now)
        status = replace(status, autoscaling=scaling.status(app, scale, now))
    return Decision(
        app=app,
        config=config,
        previous=previous,
        rebuilt=rebuilt,
        plan=plan,
        pods=pods,
        views=views,
        revision=revision,
        step=step,
        handing_off=handing_off,
        owned=owned,
        status=status,
        scale=scale,
    )


def previous_intent(
    app: StreamApp, members: Iterable[Body], partitions: int, memo: Memo
) -> tuple[Assignment, str | None]:
    """The persisted intent, or — when it is damaged or missing while the members hold targets — the
    one the members' specs describe, with why (the shell posts it as a Warning Event: planning on,
    rather than failing every reconcile until someone notices); its generation floored at the
    members' (`intentrebuild`)."""
    members = list(members)
    rebuilt = None
    try:
        found = memo.read_intent(app.status.intent, partitions)
        damage = intentrebuild.outdated(found, members)
        if damage is not None:
            raise ValueError(damage)
    except ValueError as error:
        rebuilt = f"{error}; rebuilt from the members' targets"
        found = intentrebuild.intent_from_members(members, partitions)
    return intentrebuild.floor_generation(found, members), rebuilt
