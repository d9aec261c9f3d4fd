"""How many members an app needs, from measured facts, and when a scale decision may be taken at all
(docs/design.md, invariant 9: decisions wait on their own effects).

Lag-based autoscalers read demand off a symptom. An HPA on the input lag (KEDA's Prometheus and Kafka
scalers ask for `ceil(lag / threshold)` members) sees the lag grow while capacity is short, but also
while a scale-out's new members are still warming up: it scales out again on the lag its last scale-out
is working off, and its only damping is a time window. This core reads causes instead:

- **Demand is computed, not stepped.** From the input rate and each member's *true* processing rate
  (records per second of busy time, so a half-idle member's rate says what it could do): the engine
  balances by task count, so the busiest of `n` members holds `ceil(partitions / n)` tasks, and the
  members needed is the smallest count whose busiest member stays within the utilization target at the
  input rate. A count that does not lower the busiest member's tasks (5 members of 12 tasks hold at
  most 3 each, as 4 do) is never chosen.
- **A move has a cost, and the decision prices it.** A scale-out pays a pod start and a restore of the
  tasks each new member takes (the owners' reported restore rows over the measured restore rate, in
  rounds of `maxWarmupReplicas`); the lag that builds meanwhile is sized for in the same decision.
- **With a lag target, the size that gets the lag back for the least.** A backlog over the target is
  not worked off in the target's seconds by any size: new members help only once their move is done,
  and the move takes minutes. So each size that keeps up is weighed by what it costs, in
  member-seconds: its members until the lag is back within target (the current ones work meanwhile,
  the backlog changing at the measured input less throughput; the new ones work once their move is
  done), the way back down for members above what the input needs (a scale-in waits as long as its
  handoff, then hands off), and every second the lag stays over target priced at `maxReplicas`
  members (the most the app may be paid for a second: what the user allows for keeping within
  target). The cheapest wins, the smallest on a tie, so without a backlog it is the size the rates
  call for. Why not the old rule, the fewest that work the backlog off within the target's seconds
  once in: a backlog of minutes of input met it only at the maximum, whose capacity arrives as late
  as a smaller size's; it paid for members that made the lag back within target seconds sooner, or
  after a short burst not at all (the burst over before they were in), and for their moves. Why not
  the soonest within a margin: the seconds a size saves and the members it costs must be weighed in
  one unit, and the lag target itself gives no exchange rate; `maxReplicas` does. A size smaller than
  the current one is not a way back within target: it counts only while the lag is within target and
  its busiest member works its share off within the target's seconds.
- **The gate.** No new decision while the last one is taking effect: a member it added has no ready
  pod, a warmup on a member it added is above `acceptableRecoveryLag` (or caught up and not promoted
  yet: its capacity is not processing yet either), a member it removed still holds tasks. Their lag is
  the decision working, not new demand. `settleTimeout` bounds the wait (every wait has a deadline).
- **A change must outlast the move it costs.** A scale-in waits until fewer members have sufficed for
  as long as its own handoff will take, and goes only to a size whose busiest member stays
  `scaleInHeadroom` below the utilization target at the input's mean over that time (the gap is the
  hysteresis that keeps a rate near a boundary from flapping), and only with the lag within its target.
  A scale-out while the members still keep up (busiest at most at its true rate, lag within target)
  waits likewise until the need has lasted as long as the scale-out's own move: a dip or a bump
  shorter than the move that would follow it is not followed. A scale-out for members that fall
  behind is made at once.
- **Effectiveness.** When a scale-out has settled, the members' summed true rate is compared with the
  gain expected; a scale-out that delivered less than `EFFECTIVE_FRACTION` of it is not repeated: no
  scale-out beyond that size until what the members are made from (the pod revision) changes. Its cause
  is elsewhere (a source, a sink, a shared store), and more members would only cost more.

Pure: no clock (`now` is passed in), no I/O, deterministic. What must survive an operator restart is
`AutoscalerState`, which the shell persists and hands back; the same function runs in the operator and
in the simulator (`sim/scalers.py`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from streamapp.rebalance.config import RebalanceConfig

EFFECTIVE_FRACTION = 0.1
"""A settled scale-out whose measured capacity gain is below this share of the gain it expected did not
work (Flink's autoscaler uses the same tenth for its effectiveness check)."""

RISE_FACTOR = 1.25
"""The input over the newest third of the rate window (`ScaleFacts.recent_input_rate`) replaces the
window's mean only above this multiple of it: below, the difference is within what a steady input's
noise and the reports' whole-second times make of a third of a window."""

Action = Literal["ScaleOut", "ScaleIn", "Hold", "Wait"]


@dataclass(frozen=True)
class AutoscalerConfig:
    """The `spec.autoscaling` block in the engine's units (fractions, seconds) with its defaults; its wire
    form and every check of it are `streamapp.api.autoscaling.Autoscaling`.

    `max_replicas` None means `partitions` (a member beyond that gets no task). `utilization` is the
    busiest member's share of its true rate the app is sized for; `lag_seconds` (None: no lag target)
    the input lag, in seconds of processing, the app should stay within; `scale_in_headroom` the share of
    the load a scale-in must leave spare below the target; `settle_timeout` the longest a decision waits
    on its own effects before the next may be taken.
    """

    enabled: bool = False
    min_replicas: int = 1
    max_replicas: int | None = None
    utilization: float = 0.8
    lag_seconds: float | None = None
    scale_in_headroom: float = 0.1
    settle_timeout: float = 600.0

    def bounds(self, partitions: int) -> tuple[int, int]:
        """The sizes the autoscaler may choose: at least one member, at most one per task."""
        high = min(partitions, self.max_replicas if self.max_replicas is not None else partitions)
        low = max(1, min(self.min_replicas, high))
        return low, high


@dataclass(frozen=True)
class MemberRate:
    """One member as the autoscaler sees it: whether its pod is ready, how many tasks it processes, and
    its true processing rate (records per second of busy time over the shell's window; None until it has
    processed something in it)."""

    id: int
    ready: bool = True
    active: int = 0
    rate: float | None = None


@dataclass(frozen=True)
class WarmupLag:
    """A warmup copy: of which task, on which member, whose is the task now (`owner`), and how many
    records it still lacks (None: its member has not reported it yet)."""

    task: int
    member: int
    owner: int | None = None
    lag: int | None = None


@dataclass(frozen=True)
class ScaleFacts:
    """What the shell measured, all of it from reports and pods.

    `replicas` is `spec.replicas` as it stands; `input_rate` and `throughput` records a second into and
    out of the app over the shell's window, `recent_input_rate` the input over its newest third (a rise
    beyond `RISE_FACTOR` counts at it: `_measure`); `input_lag` the records not yet processed; `restore_rows`
    what a copy without local state of a typical task restores (the owners' reports) and `restore_rate`
    the members' measured rows a second; `pod_start_seconds` how long the app's pods take to become
    ready; `revision` what member pods are made from (an ineffective scale-out is not repeated until it
    changes).
    """

    replicas: int
    partitions: int
    input_rate: float | None = None
    recent_input_rate: float | None = None
    throughput: float | None = None
    input_lag: int | None = None
    members: tuple[MemberRate, ...] = ()
    warmups: tuple[WarmupLag, ...] = ()
    restore_rows: int | None = None
    restore_rate: float | None = None
    pod_start_seconds: float | None = None
    revision: str = ""


@dataclass(frozen=True)
class AutoscalerState:
    """What the autoscaler persists between decisions (the shell keeps it in the app's status).

    The last decision: the size it set (`replicas`), the size it changed from (`previous`), when
    (`decided_at`), whether its effects are in (`settled`), and for a scale-out the members' summed true
    rate before it and what it expected after. `scale_in_since` is since when fewer members have
    sufficed without a break (None: they do not now), with the input's mean over that time
    (`scale_in_rate`, as of `seen_at`, the last decision's time); `scale_out_since` since when more
    members have been needed while the current ones keep up. `blocked_above` is the size beyond which no scale-out is made, because one from
    there did not raise throughput, found while members were made from `blocked_revision`.
    """

    replicas: int | None = None
    previous: int | None = None
    decided_at: float | None = None
    settled: bool = True
    capacity_before: float | None = None
    expected_capacity: float | None = None
    scale_in_since: float | None = None
    scale_in_rate: float | None = None
    scale_out_since: float | None = None
    seen_at: float | None = None
    blocked_above: int | None = None
    blocked_revision: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (unset fields left out)."""
        out: dict[str, Any] = {}
        for key, value in (
            ("replicas", self.replicas),
            ("previous", self.previous),
            ("decidedAt", self.decided_at),
            ("capacityBefore", self.capacity_before),
            ("expectedCapacity", self.expected_capacity),
            ("scaleInSince", self.scale_in_since),
            ("scaleInRate", self.scale_in_rate),
            ("scaleOutSince", self.scale_out_since),
            ("seenAt", self.seen_at),
            ("blockedAbove", self.blocked_above),
            ("blockedRevision", self.blocked_revision),
        ):
            if value is not None:
                out[key] = value
        if not self.settled:
            out["settled"] = False
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> AutoscalerState:
        """Inverse of `to_dict`; a missing key reads as unset."""

        def number(key: str) -> float | None:
            value = data.get(key)
            return None if value is None else float(value)

        def count(key: str) -> int | None:
            value = data.get(key)
            return None if value is None else int(value)

        revision = data.get("blockedRevision")
        return AutoscalerState(
            replicas=count("replicas"),
            previous=count("previous"),
            decided_at=number("decidedAt"),
            settled=bool(data.get("settled", True)),
            capacity_before=number("capacityBefore"),
            expected_capacity=number("expectedCapacity"),
            scale_in_since=number("scaleInSince"),
            scale_in_rate=number("scaleInRate"),
            scale_out_since=number("scaleOutSince"),
            seen_at=number("seenAt"),
            blocked_above=count("blockedAbove"),
            blocked_revision=None if revision is None else str(revision),
        )


@dataclass(frozen=True)
class ScaleDecision:
    """The autoscaler's answer: the `spec.replicas` to write (the current size unless it scales), what it
    did, why (a sentence with the figures), what it waits for (empty when nothing), when to look again
    without a new report, the members the facts call for (None when they could not be computed), the
    state to persist, and `ineffective`: this decision found the last scale-out did not work (a Warning
    Event)."""

    replicas: int
    action: Action
    reason: str
    state: AutoscalerState
    waiting_for: str = ""
    wake_at: float | None = None
    needed: int | None = None
    ineffective: bool = False


@dataclass(frozen=True)
class _Measured:
    """The facts a sizing needs, once they are all known: `growth` is how fast the backlog grows, the
    input less the throughput (negative while the members work it off)."""

    input_rate: float
    member_rate: float
    lag: float
    growth: float


def decide(
    config: AutoscalerConfig,
    rebalance: RebalanceConfig,
    facts: ScaleFacts,
    state: AutoscalerState,
    now: float,
) -> ScaleDecision:
    """The next decision: scale out, scale in, hold, or wait on the last decision's effects."""
    current = facts.replicas
    low, high = config.bounds(facts.partitions)
    note = ""
    if _unsettled(state) and state.previous == current and state.replicas != current:
        assert state.replicas is not None and state.decided_at is not None
        if low <= state.replicas <= high:
            # Decided and persisted, not written yet (the shell stopped between the two): write it now.
            return ScaleDecision(
                state.replicas,
                "ScaleOut" if state.replicas > current else "ScaleIn",
                f"carrying out the decision to go from {current} to {state.replicas} members, persisted and "
                "not written yet",
                state,
                wake_at=state.decided_at + config.settle_timeout,
            )
    if state.replicas is not None and state.replicas != current:
        # Someone else wrote spec.replicas: their size is the starting point; nothing of ours is in flight.
        note = f"spec.replicas was set to {current} outside the autoscaler; "
        state = _calm(replace(state, replicas=None, previous=None, decided_at=None, settled=True))
    if state.blocked_above is not None and state.blocked_revision != facts.revision:
        state = replace(state, blocked_above=None, blocked_revision=None)
    if current < low or current > high:
        target = low if current < low else high
        bound = f"minReplicas {low}" if current < low else f"maxReplicas {high}"
        return _scale(
            config, rebalance, facts, state, now, target, f"{note}{current} members is outside {bound}"
        )
    ineffective = False
    if not state.settled and state.decided_at is not None:
        waiting = _pending(state, facts, rebalance.acceptable_recovery_lag) if _unsettled(state) else []
        deadline = state.decided_at + config.settle_timeout
        if waiting and now < deadline:
            what = _last(state)
            return ScaleDecision(
                current,
                "Wait",
                f"{note}the {what} is taking effect; its lag is not new demand",
                state,
                waiting_for="; ".join(waiting),
                wake_at=deadline,
            )
        state, ineffective = _settle(state, facts, now >= deadline)
        if waiting:
            note += (
                f"gave up waiting on the last decision after settleTimeout ({config.settle_timeout:g} s); "
            )
        if ineffective:
            note += (
                f"the scale-out to {current} raised the members' true rate by less than "
                f"{EFFECTIVE_FRACTION:.0%} of what it expected: no scale-out beyond {current} until the pods "
                "change; "
            )
    measured = _measure(facts)
    if isinstance(measured, str):
        return ScaleDecision(
            current,
            "Hold",
            f"{note}no decision: {measured}",
            _calm(state),
            ineffective=ineffective,
        )
    needed, why = _needed(config, rebalance, facts, measured, current)
    target = max(low, min(high, needed))
    # What is watched for without a break: a larger size while the members keep up, or a smaller one.
    if target > current:
        watched = state.scale_out_since if state.scale_out_since is not None else now
        state = replace(_calm(state), scale_out_since=watched)
    else:
        state = replace(state, scale_out_since=None) if target < current else _calm(state)
    if (
        target > current
        and state.scale_out_since is not None
        and not _behind(config, facts, measured, current)
    ):
        since = state.scale_out_since
        move = _move_seconds(rebalance, facts, current, target)
        if now < since + move:
            return ScaleDecision(
                current,
                "Hold",
                f"{note}{why}; the members keep up, so the scale-out waits until the need has lasted as long "
                f"as its move ({move:,.0f} s)",
                state,
                waiting_for=f"the input to stay this high for {since + move - now:,.0f} s more",
                wake_at=since + move,
                needed=needed,
                ineffective=ineffective,
            )
    if target > current:
        if state.blocked_above is not None and target > max(current, state.blocked_above):
            allowed = max(current, state.blocked_above)
            reason = (
                f"{note}{why}, but a scale-out beyond {state.blocked_above} members did not raise throughput: "
                "not repeated"
            )
            if allowed == current:
                return ScaleDecision(current, "Hold", reason, state, needed=needed, ineffective=ineffective)
            target = allowed
        bound = f" (maxReplicas {high})" if needed > high else ""
        decision = _scale(config, rebalance, facts, state, now, target, f"{note}{why}{bound}")
        return replace(decision, needed=needed, ineffective=ineffective)
    if target < current:
        decision = _scale_in(config, rebalance, facts, measured, state, now, max(target, low), note)
        return replace(decision, needed=needed, ineffective=ineffective)
    return ScaleDecision(current, "Hold", f"{note}{why}", state, needed=needed, ineffective=ineffective)


def _calm(state: AutoscalerState) -> AutoscalerState:
    """`state` watching for no change (no smaller or larger size needed without a break)."""
    return replace(state, scale_in_since=None, scale_in_rate=None, scale_out_since=None, seen_at=None)


def _behind(config: AutoscalerConfig, facts: ScaleFacts, measured: _Measured, members: int) -> bool:
    """Whether `members` fall behind: the busiest one gets more than its true rate, or the lag is over
    its target."""
    partitions, rate = facts.partitions, measured.member_rate
    if busiest_tasks(partitions, members) * measured.input_rate / partitions > rate:
        return True
    target = config.lag_seconds
    return target is not None and lag_seconds(partitions, members, measured.lag, rate) > target


def busiest_tasks(partitions: int, members: int) -> int:
    """Tasks on the busiest member when the engine balances `partitions` tasks over `members`."""
    return math.ceil(partitions / max(1, members))


def fits(config: AutoscalerConfig, partitions: int, members: int, input_rate: float, rate: float) -> bool:
    """Whether `members` keep the busiest one within the utilization target at `input_rate`."""
    load = busiest_tasks(partitions, members) * input_rate / partitions
    return load <= config.utilization * rate


def lag_seconds(partitions: int, members: int, lag: float, rate: float) -> float:
    """The input lag in seconds of processing: how long the busiest member (its share of the backlog)
    takes to process what is waiting, at its true rate."""
    return busiest_tasks(partitions, members) * lag / partitions / rate if rate > 0 else math.inf


def _needed(
    config: AutoscalerConfig,
    rebalance: RebalanceConfig,
    facts: ScaleFacts,
    measured: _Measured,
    current: int,
) -> tuple[int, str]:
    """The member count the facts call for, and the reason in words: the fewest that keep the busiest
    member within the utilization target; with a lag target, of those (up to `maxReplicas`) the one
    that gets the lag back within it for the fewest member-seconds (`_recoveries`, `_Recovery.cost`)."""
    partitions, rate, inflow = facts.partitions, measured.member_rate, measured.input_rate
    by_rate = next(
        (n for n in range(1, partitions + 1) if fits(config, partitions, n, inflow, rate)), partitions
    )
    needed, plan, fastest = by_rate, None, None
    if config.lag_seconds is not None:
        high = max(by_rate, config.bounds(partitions)[1])
        plans = _recoveries(config.lag_seconds, rebalance, facts, measured, current, by_rate, high)
        plan = min(plans, key=lambda p: (p.cost(high), p.members), default=None)
        fastest = min(plans, key=lambda p: (p.over, p.members), default=None)
        needed = plan.members if plan is not None else high
    load = busiest_tasks(partitions, current) * inflow / partitions
    words = (
        f"input {inflow:,.0f} rec/s, true rate {rate:,.0f} rec/s a member: {current} members run the busiest at "
        f"{load / rate:.0%} (target {config.utilization:.0%})"
    )
    if config.lag_seconds is not None:
        behind = lag_seconds(partitions, current, measured.lag, rate)
        words += f", lag {behind:,.0f} s of processing (target {config.lag_seconds:g} s)"
    if plan is not None and plan.over > 0:
        keep = f"{by_rate} would keep up; " if needed > by_rate else ""
        move = (
            f", a ~{plan.move:,.0f}-s move and the ~{plan.backlog:,.0f}-record backlog then included"
            if plan.move > 0
            else ""
        )
        words += f"; {keep}with {needed} the lag is over {config.lag_seconds:g} s for ~{plan.over:,.0f} s more{move}"
        if fastest is not None and fastest.over < plan.over:
            words += (
                f"; {fastest.members} would make that ~{fastest.over:,.0f} s, not worth "
                f"{fastest.members - needed} more members"
            )
    elif needed > by_rate:
        words += (
            f"; {by_rate} would keep up, but fewer than {needed} would not work the {measured.lag:,.0f}-record "
            f"backlog off within {config.lag_seconds:g} s"
        )
    elif needed != current:
        words += f"; {needed} run it at {busiest_tasks(partitions, needed) * inflow / partitions / rate:.0%}"
    return needed, words


@dataclass(frozen=True)
class _Recovery:
    """A size as the lag target weighs it: the seconds the lag is expected over target from now on
    (`over`), the seconds until it is back within target for good (`back`), its move (`move`, 0 for
    none) and the backlog expected once the move is done, and the member-seconds of coming back down to
    the size the input needs afterwards (`way_back`)."""

    members: int
    over: float
    back: float
    move: float = 0.0
    backlog: float = 0.0
    way_back: float = 0.0

    def cost(self, lateness: int) -> float:
        """What the size costs in member-seconds: its members until the lag is back within target, its
        extra members' way back down, and each second over target priced at `lateness` members."""
        return self.members * self.back + self.way_back + lateness * self.over


def _recoveries(
    target: float,
    rebalance: RebalanceConfig,
    facts: ScaleFacts,
    measured: _Measured,
    current: int,
    smallest: int,
    largest: int,
) -> list[_Recovery]:
    """Every size from `smallest` (the fewest that keep up at the utilization target) to `largest`, with
    how long it leaves the lag over `target` seconds of processing and what it costs to get there and
    back.

    Staying: the busiest member works its share down at its spare rate (never, if it has none). A larger
    size helps only once its move is done (`_move_seconds`: pod start, then restores); until then the
    current members keep working, the backlog changing at the measured input less throughput (it grows
    while they fall behind, shrinks while they work it off), the busiest one's share over target or not
    as it is; then the new busiest works its share of what is left down at its spare rate. A size above
    the one the input needs is paid past that: a scale-in back waits as long as its handoff and then
    hands off (the scale-in rules). A smaller size is not a way back within target: it counts only while
    the lag is within target and its busiest member would work its share off within `target` seconds
    while keeping up; otherwise it is left out. Sizes that never get back within target are left out."""
    partitions, rate, inflow, lag = facts.partitions, measured.member_rate, measured.input_rate, measured.lag
    growth = measured.growth
    alone = _back_within(target, partitions, current, inflow, rate, lag)
    limit = partitions * rate * target / busiest_tasks(partitions, current)  # the current busiest at target
    plans: list[_Recovery] = []
    for n in range(smallest, largest + 1):
        if n not in (smallest, current) and busiest_tasks(partitions, n) == busiest_tasks(partitions, n - 1):
            continue  # lowers no member's load: never chosen
        way_back = (n - smallest) * 2 * _move_seconds(rebalance, facts, n, smallest)
        if n < current:
            if alone == 0 and _drains(target, partitions, n, inflow, rate, lag):
                plans.append(_Recovery(n, 0.0, 0.0, way_back=way_back))
        elif n == current:
            plans.append(_Recovery(n, alone, alone, backlog=lag, way_back=way_back))
        else:
            move = _move_seconds(rebalance, facts, current, n)
            if lag > limit:  # over target now: until the move is done, or the current members are back
                ends = move if growth >= 0 else min(move, (lag - limit) / -growth)
                starts = 0.0
            else:  # within target now: over from when the backlog reaches the limit, if before the move
                starts = min(move, (limit - lag) / growth) if growth > 0 else move
                ends = move
            backlog = max(0.0, lag + growth * move)
            after = _back_within(target, partitions, n, inflow, rate, backlog)
            over = ends - starts + after
            back = move + after if after > 0 else (ends if ends > starts else 0.0)
            plans.append(_Recovery(n, over, back, move, backlog, way_back))
    return [p for p in plans if p.back < math.inf]


def _back_within(
    target: float, partitions: int, members: int, inflow: float, rate: float, backlog: float
) -> float:
    """Seconds until the busiest of `members` has worked its share of `backlog` down to `target` seconds
    of processing while keeping up with its input (0: it is there and stays; `math.inf`: it never gets
    there, or falls behind)."""
    tasks = busiest_tasks(partitions, members)
    excess = tasks * backlog / partitions - target * rate
    spare = rate - tasks * inflow / partitions
    if spare < 0 or (spare == 0 and excess > 0):
        return math.inf
    return excess / spare if excess > 0 else 0.0


def _drains(target: float, partitions: int, members: int, inflow: float, rate: float, backlog: float) -> bool:
    """Whether the busiest of `members` works off its share of `backlog` within `target` seconds while
    keeping up with its input."""
    tasks = busiest_tasks(partitions, members)
    spare = rate - tasks * inflow / partitions
    return spare > 0 and tasks * backlog / partitions <= spare * target


def _scale_in(
    config: AutoscalerConfig,
    rebalance: RebalanceConfig,
    facts: ScaleFacts,
    measured: _Measured,
    state: AutoscalerState,
    now: float,
    smallest: int,
    note: str,
) -> ScaleDecision:
    """Scale in, once fewer members have sufficed for as long as the handoff takes, to the smallest size
    from `smallest` up that leaves the headroom at the input's mean since then; hold otherwise.
    `smallest` already works off the backlog within the lag target (`_needed`), and so does every larger
    size: the lag is within target now."""
    current, partitions, rate = facts.replicas, facts.partitions, measured.member_rate
    headroom = config.scale_in_headroom
    since = state.scale_in_since if state.scale_in_since is not None else now
    seen = state.seen_at if state.scale_in_since is not None and state.seen_at is not None else now
    before = state.scale_in_rate if state.scale_in_rate is not None else measured.input_rate
    mean = (
        (before * (seen - since) + measured.input_rate * (now - seen)) / (now - since)
        if now > since
        else before
    )
    watching = replace(state, scale_in_since=since, scale_in_rate=mean, seen_at=now)
    spare = replace(config, utilization=config.utilization / (1 + headroom))
    candidate = next((n for n in range(smallest, current) if fits(spare, partitions, n, mean, rate)), None)
    if candidate is None:
        return ScaleDecision(
            current,
            "Hold",
            f"{note}{smallest} members would carry the input now, but none fewer than {current} keeps {headroom:.0%} "
            f"headroom below the {config.utilization:.0%} target at its mean of {mean:,.0f} rec/s over "
            f"{now - since:,.0f} s",
            watching,
        )
    handoff = _move_seconds(rebalance, facts, current, candidate)
    if now < since + handoff:
        return ScaleDecision(
            current,
            "Hold",
            f"{note}{candidate} members would carry the input with {headroom:.0%} headroom for "
            f"{now - since:,.0f} s; scaling in once that has lasted as long as the handoff it costs "
            f"({handoff:,.0f} s)",
            watching,
            waiting_for=f"the input to stay low for {since + handoff - now:,.0f} s more",
            wake_at=since + handoff,
        )
    load = busiest_tasks(partitions, candidate) * mean / partitions
    return _scale(
        config,
        rebalance,
        facts,
        state,
        now,
        candidate,
        f"{note}the input has needed fewer members for {now - since:,.0f} s: at its mean of {mean:,.0f} rec/s "
        f"{candidate} run the busiest at {load / rate:.0%} of its {rate:,.0f} rec/s (target "
        f"{config.utilization:.0%}, {headroom:.0%} headroom kept)",
    )


def _scale(
    config: AutoscalerConfig,
    rebalance: RebalanceConfig,
    facts: ScaleFacts,
    state: AutoscalerState,
    now: float,
    target: int,
    why: str,
) -> ScaleDecision:
    """A decision to change the size to `target`, with the state that makes the next one wait for it."""
    current = facts.replicas
    out = target > current
    rates = _rates(facts)
    each = statistics.median(rates) if rates else None
    before = _capacity(facts, each) if out and each is not None else None
    expected = before + each * (target - current) if before is not None and each is not None else None
    cost = _move_seconds(rebalance, facts, current, target)
    decided = AutoscalerState(
        replicas=target,
        previous=current,
        decided_at=now,
        settled=False,
        capacity_before=before,
        expected_capacity=expected,
        blocked_above=state.blocked_above,
        blocked_revision=state.blocked_revision,
    )
    return ScaleDecision(
        target,
        "ScaleOut" if out else "ScaleIn",
        f"{why}; {current} → {target} members, its handoff expected to take ~{cost:,.0f} s",
        decided,
        wake_at=now + config.settle_timeout,
    )


def _unsettled(state: AutoscalerState) -> bool:
    """Whether the state names a decision whose effects can still be waited for."""
    return not state.settled and state.replicas is not None and state.previous is not None


def _pending(state: AutoscalerState, facts: ScaleFacts, acceptable_lag: int) -> list[str]:
    """What the last decision still waits for, in words (empty once its effects are in)."""
    assert state.replicas is not None and state.previous is not None
    members = {m.id: m for m in facts.members}
    waiting: list[str] = []
    if state.replicas > state.previous:
        added = range(state.previous, state.replicas)
        starting = [m for m in added if m not in members or not members[m].ready]
        if starting:
            waiting.append(f"the pods of members {_ids(starting)} to become ready")
        ours = [w for w in facts.warmups if w.member in added]
        behind = [w for w in ours if w.lag is None or w.lag > acceptable_lag]
        if behind:
            waiting.append(_warmups(behind, acceptable_lag))
        elif ours:
            # Caught up, not promoted yet: the capacity the decision adds is not processing yet either.
            count = f"{len(ours)} caught-up warmup{'s' if len(ours) != 1 else ''}"
            waiting.append(f"{count} to take {_tasks(ours)} over")
        warming = {w.member for w in ours}
        idle = [
            m
            for m in added
            if m in members and members[m].ready and not members[m].active and m not in warming
        ]
        if idle:
            waiting.append(f"members {_ids(idle)} to be given tasks")
        unmeasured = [m for m in added if m in members and members[m].active and members[m].rate is None]
        if not waiting and unmeasured:
            waiting.append(f"the processing rates of members {_ids(unmeasured)}")
    else:
        leaving = sorted(m for m in members if m >= state.replicas)
        if leaving:
            waiting.append(f"members {_ids(leaving)} to hand their tasks off")
        behind = [
            w
            for w in facts.warmups
            if w.owner is not None and w.owner >= state.replicas and (w.lag is None or w.lag > acceptable_lag)
        ]
        if behind:
            waiting.append(_warmups(behind, acceptable_lag))
    return waiting


def _settle(state: AutoscalerState, facts: ScaleFacts, timed_out: bool) -> tuple[AutoscalerState, bool]:
    """The last decision's effects are in (or its wait timed out): mark it settled and, for a
    scale-out whose capacity was measured on both sides, judge whether it raised the members' true rate."""
    settled = _calm(replace(state, settled=True))
    before, expected = state.capacity_before, state.expected_capacity
    if timed_out or before is None or expected is None or expected <= before:
        return settled, False
    rates = _rates(facts)
    after = _capacity(facts, statistics.median(rates)) if rates else None
    if after is None or after - before >= EFFECTIVE_FRACTION * (expected - before):
        return settled, False
    return replace(settled, blocked_above=state.replicas, blocked_revision=facts.revision), True


def _measure(facts: ScaleFacts) -> _Measured | str:
    """The facts a sizing needs, or what is missing, in words."""
    rates = _rates(facts)
    if facts.input_rate is None:
        return "the input rate is not measured yet"
    if not rates:
        return "no member's processing rate is measured yet"
    member_rate = statistics.median(rates)
    capacity = _capacity(facts, member_rate)
    # An input that rose within the window counts at its newest rate: read at the window's mean, a step
    # up sized the scale-out for the input half-way up, and a second scale-out followed for the backlog
    # the first one's too few members let build (the step trace: 2 -> 6 -> 12 members). A fall counts
    # at the mean: a scale-in waits for the input to stay low anyway.
    recent = facts.recent_input_rate
    inflow = recent if recent is not None and recent > RISE_FACTOR * facts.input_rate else facts.input_rate
    throughput = facts.throughput if facts.throughput is not None else min(inflow, capacity)
    return _Measured(
        input_rate=inflow,
        member_rate=member_rate,
        lag=float(facts.input_lag or 0),
        growth=inflow - throughput,
    )


def _rates(facts: ScaleFacts) -> list[float]:
    """The measured true rates of ready members (sorted, so the median is deterministic)."""
    return sorted(m.rate for m in facts.members if m.ready and m.rate is not None and m.rate > 0)


def _capacity(facts: ScaleFacts, each: float) -> float:
    """The summed true rate of the members processing tasks (a member not measured yet counts `each`)."""
    return sum(m.rate if m.rate is not None else each for m in facts.members if m.ready and m.active)


def _move_seconds(rebalance: RebalanceConfig, facts: ScaleFacts, current: int, target: int) -> float:
    """The expected length of a resize's handoff: for a scale-out a pod start, then the restores of the
    tasks each new member takes; for a scale-in the restores each remaining member takes on. Restores run
    `maxWarmupReplicas` at a time per member, each the reported restore rows over the measured rate; an
    unmeasured figure counts nothing."""
    partitions = facts.partitions
    if target == current:
        return 0.0
    if target > current:
        gain = max(1, partitions // target)
        start = facts.pod_start_seconds or 0.0
    else:
        gain = max(0, busiest_tasks(partitions, target) - partitions // max(1, current))
        start = 0.0
    restore = (
        facts.restore_rows / facts.restore_rate
        if facts.restore_rows is not None and facts.restore_rate is not None and facts.restore_rate > 0
        else 0.0
    )
    return start + math.ceil(gain / rebalance.max_warmup_replicas) * restore


def _last(state: AutoscalerState) -> str:
    assert state.replicas is not None and state.previous is not None
    kind = "scale-out" if state.replicas > state.previous else "scale-in"
    return f"{kind} from {state.previous} to {state.replicas} members"


def _warmups(behind: Sequence[WarmupLag], acceptable_lag: int) -> str:
    worst = max(behind, key=lambda w: (w.lag is None, w.lag or 0, -w.task))
    how = "not reported yet" if worst.lag is None else f"{worst.lag:,} records behind"
    return (
        f"{len(behind)} warmup{'s' if len(behind) != 1 else ''} to come within acceptableRecoveryLag "
        f"({acceptable_lag:,}): task {worst.task} on member {worst.member} {how}"
    )


def _tasks(warmups: Sequence[WarmupLag]) -> str:
    tasks = sorted({w.task for w in warmups})
    return f"task{'s' if len(tasks) != 1 else ''} {_ids(tasks)}"


def _ids(members: Sequence[int]) -> str:
    return ",".join(str(m) for m in members)
