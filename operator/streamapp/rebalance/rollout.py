"""Rolling updates: which member's pod is replaced next, and when (a Deployment's rollout, task-aware).

Every member pod carries the revision (a hash) of the spec it was made from. When the app's spec
changes, members whose pod has another revision are replaced, at most `maxUnavailable` at a time
counting members whose pod is missing or not ready. With the `handoff` strategy a member is first
marked *retiring*: the engine treats it like a draining member, so its active tasks move to caught-up
copies elsewhere through the normal warmup → revoke → ack → assign path, and its pod is deleted only
once it owns no active task — or when `handoffTimeout` has passed since the handoff began, so a
handoff that cannot finish never stalls the rollout for good. A handoff still restoring is not cut
short while its successors are measured to finish it soon (`handoff_left`): a member's restores share
its throughput, so one that takes several of the member's tasks restores them one share at a time,
and cutting such a handoff sends the tasks it had not finished down for a restore in full. `inPlace`
deletes the pod at once and its tasks wait for it under the usual reservation. `auto` chooses per
member by what the executors measured (`Costs`) and by the volume a handoff would restore
(`warming_seconds`). Pure: the shell persists when a handoff began (on the pod) and the measured costs
(in the app's status), and passes the clock in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from streamapp.rebalance.costs import UNMEASURED, Costs, expected_return
from streamapp.rebalance.model import Assignment, MemberView
from streamapp.rebalance.quotas import quotas

HANDOFF_FLOOR_SECONDS = 1.0
"""Less than a handoff ever stands a task still: the old owner's last batch, the acknowledgement's round
trip and the new owner's first batch (real executors measured 1.1-1.6 s: bench/results/rollout.md). A
member measured to restart within it restarts in place even before a handoff is measured."""

WARMING_LIMIT = 2.0
"""`auto` hands a member off only while its successors are expected to warm copies of its tasks within
this many times its restart. A handoff stands no task still but holds the rollout on the member while
its successors restore every task of it in full, over the same links and cores that restore lost tasks;
a restart in place from a claim stands the member's tasks still for one restart and replays only what
they missed. Past twice the restart, a member's turn (handoff, then restart) takes over three times an
in-place one: with 100-s restores, six tasks a member and a 40-s restart, handing every member off
took 750 s to balance again against 164 in place (bench/scenarios/rolling-restart-large-state.yaml).
Below it — small state, or standbys already caught up — the handoff is short and no task waits."""

_HANDOFF_SLACK_SECONDS = 30.0
"""How long past its successors' measured end a handoff that outlasted `handoffTimeout` may take: a copy
caught up still waits for a report, a plan and the old owner's acknowledgement before it takes over."""

Strategy = Literal["handoff", "inPlace", "auto"]


@dataclass(frozen=True)
class RolloutConfig:
    """The `spec.rollingUpdate` block in the engine's units, with its defaults; its wire form and every
    check of it are `streamapp.api.rollingupdate.RollingUpdate`.

    `auto` restarts in place when a handoff cannot be warm: a single member has nowhere to hand off
    to, and the cooperative and eager protocols would move the tasks cold, which costs more than
    waiting for the member's own pod. Otherwise it chooses per member by measured cost (`choose`).
    `handoff` forces the handoff whenever another member is ready; `inPlace` never hands off.
    """

    strategy: Strategy = "auto"
    max_unavailable: int = 1
    paused: bool = False
    handoff_timeout: float = 600.0


@dataclass(frozen=True)
class MemberPod:
    """A member's pod as observed: its revision, readiness, when its handoff began (if it did), when it
    became ready, and whether its executor has reported (`reporting`): one that never did processes
    nothing, so it has nothing to hand off."""

    member: int
    revision: str
    ready: bool
    retiring_since: float | None = None
    ready_since: float | None = None
    reporting: bool = True


@dataclass(frozen=True)
class Choice:
    """Whether a member hands its tasks off before its pod goes, and why (a phrase with the figures)."""

    hands_off: bool
    why: str


@dataclass(frozen=True)
class RolloutStep:
    """What the shell does now: mark `retiring` members (member → when their handoff began), mark
    `upcoming` ones (the next to hand off: copies of their tasks warm ahead), delete the pods in
    `delete` — those in `stuck` because their executor is stuck (`stuck`), the others for the
    rollout — and look again at `wake_at` (a handoff timeout) if nothing else wakes it. `reasons`
    says, for each ready member this step hands off or deletes, why it went that way."""

    retiring: Mapping[int, float]
    delete: tuple[int, ...]
    updated: int
    outdated: tuple[int, ...]
    wake_at: float | None = None
    reasons: Mapping[int, str] = field(default_factory=dict)
    upcoming: tuple[int, ...] = ()
    stuck: tuple[int, ...] = ()

    @property
    def rolling(self) -> bool:
        """Whether any wanted member still runs a pod of another revision."""
        return bool(self.outdated)


def rollout_step(
    pods: Mapping[int, MemberPod],
    replicas: int,
    revision: str,
    active: Mapping[int, int],
    config: RolloutConfig,
    now: float,
    warm: bool = True,
    costs: Costs = UNMEASURED,
    settled: bool = True,
    left: Mapping[int, float] | None = None,
    warming: Mapping[int, float] | None = None,
) -> RolloutStep:
    """The next step of the rollout to `revision`; `active` counts each member's active tasks
    (revoking ones included: a task is not handed off until its owner let go); `warm` says whether
    the protocol warms successors before a handoff; `costs` and `warming` (`warming_seconds`) are what
    `auto` chooses by; `settled` whether the app's assignment is at rest (nothing warming, revoking or
    held for a lost member); `left` the seconds each handing-off member's handoff is measured to need
    still (`handoff_left`).

    Every step chooses again for a member handing off, so a handoff whose successors are gone, or
    one that measured handoffs costlier than the member's restart, ends in a restart in place.

    The next member is taken only once the app has settled after the last one came back (`_waits`):
    a member back from a handoff takes its tasks back from the others while its claim still holds their
    state — a replay of what it missed — and the next member's tasks then spread over every other
    member, where taking the next member at once sent them all to the one with room, to restore in
    full a few at a time (bench/scenarios/rolling-restart-large-state.yaml: balanced after 1,594 s
    against 540 s). A member whose executor never reported is replaced at once: it processes nothing.

    Up to `maxUnavailable` members that will hand off next are `upcoming`: while the app settles, the
    members that will take their tasks warm copies ahead (`rebalance.upcoming`), the one handing off
    now included, so their handoff is ready when their turn comes instead of starting it. Only when the
    members keep their state on a claim: a copy warmed on a member about to restart must survive it."""
    wanted = [m for m in range(replicas) if m in pods]
    outdated = tuple(m for m in wanted if pods[m].revision != revision)
    updated = len(wanted) - len(outdated)
    if config.paused or not outdated:
        return RolloutStep({}, (), updated, outdated)
    delete = [m for m in outdated if not pods[m].ready or not pods[m].reporting]
    busy = replicas - sum(1 for m in wanted if pods[m].ready)
    waiting = _waits(pods, wanted, revision, settled, config, now)
    retiring: dict[int, float] = {}
    reasons: dict[int, str] = {
        m: "its executor has not reported: it processes nothing to hand off"
        for m in outdated
        if pods[m].ready and not pods[m].reporting
    }
    candidates = (m for m in outdated if pods[m].ready and pods[m].reporting)
    upcoming: list[int] = []
    for member in sorted(candidates, key=lambda m: _order(pods[m])):
        since = pods[member].retiring_since
        successor = _successor_ready(member, pods, retiring, replicas)
        choice = choose(member, successor, config, warm, costs, (warming or {}).get(member))
        if since is None and (busy >= config.max_unavailable or waiting is not None):
            if choice.hands_off and costs.claims and len(upcoming) < config.max_unavailable:
                upcoming.append(member)
            continue
        busy += 1
        timed_out = since is not None and now >= _deadline(since, (left or {}).get(member), config, now)
        if choice.hands_off and active.get(member, 0) > 0 and not timed_out:
            retiring[member] = now if since is None else since
        else:
            delete.append(member)
        reasons[member] = _reason(choice, since, timed_out, active.get(member, 0) > 0, config)
    deadlines = [_deadline(since, (left or {}).get(m), config, now) for m, since in retiring.items()]
    if waiting is not None:
        deadlines.append(waiting)
    wake_at = min(deadlines, default=None)
    return RolloutStep(retiring, tuple(sorted(delete)), updated, outdated, wake_at, reasons, tuple(upcoming))


def settled_step(
    pods: Mapping[int, MemberPod],
    replicas: int,
    revision: str,
    config: RolloutConfig,
    now: float,
    warm: bool,
    costs: Costs,
    assignment: Assignment,
    views: Sequence[MemberView],
) -> RolloutStep:
    """`rollout_step` with the app's rest judged by `at_rest`, the copies warming ahead for the
    members the step names upcoming not counting: the shell keeps no memory of which members were
    upcoming, so without the second look those copies would hold the next member back until
    `handoffTimeout`."""
    active = dict(Counter(t.active for t in assignment.tasks if t.active is not None))
    settled = at_rest(assignment, views, replicas)
    left = handoff_left(assignment, views)
    warming = warming_seconds(assignment, views, replicas)
    step = rollout_step(pods, replicas, revision, active, config, now, warm, costs, settled, left, warming)
    if settled or not step.upcoming:
        return step
    marked = [replace(v, upcoming=v.upcoming or v.id in step.upcoming) for v in views]
    if not at_rest(assignment, marked, replicas):
        return step
    return rollout_step(pods, replicas, revision, active, config, now, warm, costs, True, left, warming)


def warming_seconds(assignment: Assignment, views: Iterable[MemberView], replicas: int) -> dict[int, float]:
    """Per member owning active tasks, about how long the other live members would take to warm copies
    of all of them: the rows each task's copy lacks on the successor that lacks fewest (its lag there,
    else a restore in full, `restore_rows`), over the successors' summed restore throughput — a
    member's restores share its throughput, and a handoff spreads the tasks over every successor. A
    successor not measured counts at the median of those measured. A member is left out when a task's
    size or every successor's throughput is unknown: nothing says how long its handoff takes."""
    views = list(views)
    rows: dict[int, int] = {}
    for view in views:
        for task, count in view.restore_rows.items():
            rows[task] = max(rows.get(task, 0), count)
    live = [v for v in views if v.alive and not v.retiring and v.id < replicas]
    measured = sorted(v.restore_rate for v in live if v.restore_rate)
    owned: dict[int, list[int]] = {}
    for task, state in enumerate(assignment.tasks):
        if state.active is not None and state.revoking_since is None:
            owned.setdefault(state.active, []).append(task)
    seconds: dict[int, float] = {}
    for member, tasks in owned.items():
        successors = [v for v in live if v.id != member]
        if not successors or not measured:
            continue
        median = measured[len(measured) // 2]
        rate = sum(v.restore_rate or median for v in successors)
        lacking = [_lacking(task, successors, rows) for task in tasks]
        if None not in lacking:
            seconds[member] = sum(n for n in lacking if n is not None) / rate
    return seconds


def _lacking(task: int, successors: Sequence[MemberView], rows: Mapping[int, int]) -> int | None:
    """The rows the successor closest to current lacks of `task` (None: no lag there and no size known)."""
    lags = [v.lags[task] for v in successors if task in v.lags]
    if lags:
        return min(lags)
    return rows.get(task)


def handoff_left(assignment: Assignment, views: Iterable[MemberView]) -> dict[int, float]:
    """Per member handing off (`retiring`), the seconds its handoff is measured to need still: every
    task it still owns has a copy warming on a member whose restore throughput is measured, and each
    such member restores the lags of all the copies warming on it (they share its throughput) in their
    sum over its rate; the slowest of them. A member with a task no copy of which is warming and
    measured is left out: nothing says when its handoff ends."""
    by_id = {v.id: v for v in views}
    retiring = {v.id for v in views if v.retiring}
    queued: dict[int, float] = {}
    for task, t in enumerate(assignment.tasks):
        for member in t.warmups:
            lag = by_id[member].lags.get(task) if member in by_id else None
            queued[member] = queued.get(member, 0.0) + (lag if lag is not None else float("inf"))
    left: dict[int, float] = {}
    unknown: set[int] = set()
    for task, t in enumerate(assignment.tasks):
        if t.active not in retiring or t.revoking_since is not None:
            continue
        ends = [
            queued[m] / rate
            for m in t.warmups
            if m in by_id and (rate := by_id[m].restore_rate) and by_id[m].lags.get(task) is not None
        ]
        if not ends or min(ends) == float("inf"):
            unknown.add(t.active)
        else:
            left[t.active] = max(left.get(t.active, 0.0), min(ends))
    return {member: seconds for member, seconds in left.items() if member not in unknown}


def _deadline(since: float, left: float | None, config: RolloutConfig, now: float) -> float:
    """When a handoff that began at `since` times out: `handoffTimeout` after it began, or — when its
    successors are measured to finish it (`left` seconds from now) within another `handoffTimeout` —
    once they should have, and at the latest twice `handoffTimeout` after it began, so a handoff whose
    copies stop catching up still never stalls the rollout for good."""
    deadline = since + config.handoff_timeout
    if left is None or now + left > since + 2 * config.handoff_timeout:
        return deadline
    return max(deadline, now + left + _HANDOFF_SLACK_SECONDS)


def at_rest(assignment: Assignment, views: Iterable[MemberView], replicas: int) -> bool:
    """Whether the app's assignment is at rest for a rollout to take its next member: nothing warming,
    revoking or held for a lost member, and every live member owning its share but for one task (a
    member back from a handoff owns nothing until its tasks come back; a plan has yet to move them). A
    member damped for flapping owns nothing by design (`flapping`), and has no share. Copies warming
    ahead for an upcoming member (`rebalance.upcoming`) do not count: they wait for its turn, which
    waits for this.

    Nor is it at rest while a live member's active task still restores (a takeover: its owner reports
    a lag until it processes): restarting that member throws the restore away. In a large cluster
    run the rollout restarted a member 110 s into a ~235-s restore of a task it had taken over, and
    the task stood still 336 s."""
    views = list(views)
    upcoming = {v.id for v in views if v.upcoming}
    lags = {v.id: v.lags for v in views if v.alive}
    if assignment.reservations or any(
        t.revoking_since is not None
        or (t.warmups and t.active not in upcoming)
        or (t.active in lags and lags[t.active].get(task, 0) > 0)
        for task, t in enumerate(assignment.tasks)
    ):
        return False
    damped = {f.member for f in assignment.flaps if f.damped}
    live = {
        v.id: v.capacity
        for v in views
        if v.alive and not v.retiring and v.id < replicas and v.id not in damped
    }
    if not live:
        return True
    owned = dict.fromkeys(live, 0)
    for task in assignment.tasks:
        if task.active in owned:
            owned[task.active] += 1
    share = quotas(len(assignment.tasks), sorted(live), live.__getitem__, owned)
    return all(owned[m] >= share[m] - 1 for m in live)


def _waits(
    pods: Mapping[int, MemberPod],
    wanted: list[int],
    revision: str,
    settled: bool,
    config: RolloutConfig,
    now: float,
) -> float | None:
    """Until when the rollout waits for the app to settle before taking the next member (None: it does
    not): at most `handoffTimeout` after the newest updated pod became ready, so an app that never
    settles (a copy that cannot catch up) slows the rollout but never stops it."""
    if settled:
        return None
    newest = max(
        (p.ready_since for m in wanted if (p := pods[m]).revision == revision and p.ready_since is not None),
        default=None,
    )
    if newest is None or now >= newest + config.handoff_timeout:
        return None
    return newest + config.handoff_timeout


def _order(pod: MemberPod) -> tuple[bool, int]:
    """Handoffs under way first (they are resumed, not restarted), then the highest id, as a
    StatefulSet does."""
    return (pod.retiring_since is None, -pod.member)


def _successor_ready(
    member: int, pods: Mapping[int, MemberPod], retiring: Mapping[int, float], replicas: int
) -> bool:
    """Whether some other ready member stays to take `member`'s tasks."""
    return any(
        pods[m].ready and m not in retiring and pods[m].retiring_since is None
        for m in range(replicas)
        if m != member and m in pods
    )


def choose(
    member: int,
    successor: bool,
    config: RolloutConfig,
    warm: bool,
    costs: Costs,
    warming: float | None = None,
) -> Choice:
    """Whether `member` hands its tasks off before its pod goes (`successor`: another ready member
    stays to take them; `warm`: the protocol warms successors first; `warming`: about how long they
    would take to warm its tasks, `warming_seconds`).

    `auto` restarts in place only when that is expected to be cheaper: the member keeps its state on
    a claim, and either its successors would take more than `WARMING_LIMIT` times its restart to warm
    its tasks, or its measured restart is shorter than the measured handoff. Anything else unknown means
    a handoff, whose goal is that no task waits for a pod; the handoffs of the first rollout measure it.
    """
    if config.strategy == "inPlace":
        return Choice(False, "rollingUpdate.strategy is inPlace")
    if not successor:
        return Choice(False, "no other ready member can take its tasks")
    if config.strategy == "handoff":
        return Choice(True, "rollingUpdate.strategy is handoff")
    if not warm:
        return Choice(False, "the protocol does not warm successors, so a handoff would move its tasks cold")
    return _by_cost(member, costs, warming)


def _by_cost(member: int, costs: Costs, warming: float | None) -> Choice:
    """`auto` with a warm protocol and somewhere to go: the cheaper way, by the measured costs. A restart
    not measured is expected to take what the app's others took, or at least a pod start
    (`expected_return`)."""
    if not costs.claims:
        return Choice(True, "its local state is not on a claim, so a restart would restore it in full")
    expected = expected_return(member, costs.restart, costs.pod_start)
    if warming is not None and expected is not None and warming > WARMING_LIMIT * expected:
        return Choice(
            False,
            f"warming its tasks elsewhere would take ~{warming:.0f} s, over {WARMING_LIMIT:g}x "
            f"its restart ({expected:.0f} s)",
        )
    restart = costs.restart.get(member)
    if restart is None:
        return Choice(True, "its restart time is not measured yet")
    if costs.handoff is None and restart <= HANDOFF_FLOOR_SECONDS:
        return Choice(False, f"measured restart {restart:.1f} s: no handoff is quicker")
    if costs.handoff is None:
        return Choice(True, f"measured restart {restart:.1f} s, handoff time not measured yet")
    if restart < costs.handoff:
        return Choice(False, f"measured restart {restart:.1f} s < handoff {costs.handoff:.1f} s")
    return Choice(True, f"measured restart {restart:.1f} s >= handoff {costs.handoff:.1f} s")


def _reason(choice: Choice, since: float | None, timed_out: bool, owns: bool, config: RolloutConfig) -> str:
    """Why a member's pod goes now (or, handing off, later): the choice, unless its handoff timed out
    or there is nothing (left) to hand off."""
    if timed_out:
        return f"its handoff did not finish within handoffTimeout ({config.handoff_timeout:g} s)"
    if choice.hands_off and not owns:
        return "its tasks are handed off" if since is not None else "it owns no active task to hand off"
    return choice.why
