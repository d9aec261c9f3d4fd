"""Property tests of the engine's invariants (docs/design.md) over random event sequences, for every
protocol where they apply."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from world import World

from streamapp.rebalance import (
    PROTOCOLS,
    AppConfig,
    Assignment,
    MemberView,
    Plan,
    RebalanceConfig,
    Reservation,
    plan,
)
from streamapp.rebalance.recovery import LATE_FACTOR
from streamapp.rebalance.reservations import prewarm_at
from streamapp.rebalance.restorequeue import OVERLAP_SECONDS

ZONES = ("a", "b", "c")


@dataclass(frozen=True)
class Setup:
    app: AppConfig
    zones: tuple[str, ...]
    capacities: tuple[float, ...]


@st.composite
def setups(draw: st.DrawFn, protocols: tuple[str, ...] = PROTOCOLS) -> Setup:
    config = RebalanceConfig(
        protocol=draw(st.sampled_from(protocols)),
        scheduled_rebalance_max_delay=draw(st.sampled_from([0.0, 30.0, 300.0])),
        acceptable_recovery_lag=draw(st.sampled_from([0, 100, 10_000])),
        handoff_lag=draw(st.sampled_from([0, 50])),
        max_warmup_replicas=draw(st.integers(1, 3)),
        max_warmup_replicas_total=draw(st.sampled_from([0, 1, 4])),
        standby_replicas=draw(st.integers(0, 2)),
        failover_to_standby=draw(st.booleans()),
        drain_on_scale_in=draw(st.booleans()),
        probing_rebalance_interval=draw(st.sampled_from([60.0, 600.0])),
        revocation_timeout=draw(st.sampled_from([60.0, 300.0])),
        lost_task_recovery=draw(st.sampled_from(["auto", "delay"])),
    )
    app = AppConfig(draw(st.integers(1, 24)), draw(st.integers(1, 6)), config)
    zones = draw(st.sampled_from([(), ZONES[:2], ZONES]))
    capacities = draw(st.sampled_from([(), (1.0, 2.0)]))
    return Setup(app, zones, capacities)


# One step of the world: (kind, member, value). Members beyond the app's size exercise scale-in;
# "deafen" makes a member stop applying and acknowledging (until its pod is replaced), "retire" marks
# or unmarks (a paused rollout) a member a rolling update is about to replace, "next" one it will hand
# off next (copies of its tasks warm ahead), "return" marks or
# unmarks (a crash loop) a dead member's pod as visibly starting again, "lose_intent" deletes and
# re-creates the app on the same store, "estimate" changes what a member reports of restores (a task's
# rows, its rate) and what the shell expects of its return.
KINDS = [
    "plan",
    "apply",
    "catchup",
    "lag",
    "kill",
    "revive",
    "scale",
    "advance",
    "apply_all",
    "deafen",
    "retire",
    "next",
    "return",
    "estimate",
]
events = st.lists(
    st.tuples(
        st.sampled_from([*KINDS, "lose_intent"]),
        st.integers(0, 7),
        st.integers(0, 400),
    ),
    min_size=1,
    max_size=40,
)
# Histories around the two faults, run on a settled app: whole rounds (see `run`) and scaling make
# revocations common, and owners stall on them, so deaf members, timeouts and lost intents meet them.
ROUNDS = ["round"] * 4 + ["scale", "scale", "lose_intent", "lose_intent", "deafen", "kill", "revive"]
faults = st.lists(
    st.tuples(st.sampled_from(ROUNDS), st.integers(0, 7), st.integers(0, 400)), min_size=1, max_size=30
)


def played(setup: Setup, history: list[tuple[str, int, int]]) -> World:
    """The world of `setup` after the random `history` of events, each plan checked (`run`)."""
    world = World.start(setup.app, setup.zones, setup.capacities)
    for kind, member, value in history:
        run(world, kind, member, value)
    return world


def run(world: World, kind: str, member: int, value: int) -> None:
    """Interpret one random event; every plan is followed by the invariant checks."""
    if kind == "plan":
        before, views = world.assignment, world.views()
        result = world.replan()
        check_step(world, before, result.assignment, views)
        check_deadlines(world, before, result, views)
    elif kind == "apply" and member in world.members:
        world.apply(member)
    elif kind == "apply_all":
        for m in sorted(world.members, reverse=value % 2 == 0):
            world.apply(m)
    elif kind == "catchup" and member in world.members:
        world.catch_up(member)
    elif kind == "lag" and member in world.members:
        world.members[member].lags[value % world.app.partitions] = value * 50
    elif kind == "kill":
        world.kill(member)
    elif kind == "revive":
        world.revive(member)
    elif kind == "scale":
        world.scale(1 + value % 7)
    elif kind == "advance":
        world.now += value
    elif kind == "round":
        # A whole generation: plan, owners asked to let go may stall, the others apply and catch up,
        # and the clock moves by none, half or all of the revocation timeout.
        run(world, "plan", member, value)
        if value % 2:
            run(world, "stall", member, value)
        for m in sorted(world.members):
            world.apply(m)
            world.catch_up(m)
        world.now += world.app.rebalance.revocation_timeout * (value // 2 % 3) / 2
    elif kind == "deafen" and member in world.members:
        world.members[member].deaf = True
    elif kind == "return" and member in world.members:
        world.members[member].returning = not world.members[member].returning
    elif kind == "estimate" and member in world.members:
        estimated = world.members[member]
        estimated.restore_rows[value % world.app.partitions] = value * 5_000
        estimated.restore_rate = float(value * 1_000) if value % 5 else None
        estimated.return_seconds = float(value % 120) if value % 7 else None
    elif kind == "retire" and member in world.members:
        world.members[member].retiring = not world.members[member].retiring
    elif kind == "next" and member in world.members:
        world.members[member].upcoming = not world.members[member].upcoming
    elif kind == "stall":
        for t in world.assignment.tasks:
            if t.active is not None and t.revoking_since is not None:
                world.members[t.active].deaf = True
    elif kind == "lose_intent":
        world.lose_intent()
    assert not world.double_owned(), f"two members process one task: {world.double_owned()}"


def check_step(world: World, before: Assignment, after: Assignment, observed: list[MemberView]) -> None:
    """Invariants 1, 2 and 5 across one planning step made on `observed`, plus the shape of copies,
    and the epoch floor: no epoch handed out is at or below one a member saw in the store."""
    config = world.app.rebalance
    views = {v.id: v for v in observed}
    floor = {t: max(v.store_epochs.get(t, 0) for v in observed) for t in range(world.app.partitions)}
    live = {i for i, v in views.items() if v.alive and i < world.app.replicas and not v.retiring}

    barrier = any(t.revoking_since is not None for t in after.tasks)
    insurance: set[tuple[int, int]] = set()

    def alive(i: int) -> bool:
        return i in views and views[i].alive

    for task, (old, new) in enumerate(zip(before.tasks, after.tasks, strict=True)):
        if new.active is not None and (new.active, new.epoch) != (old.active, old.epoch):
            assert new.epoch > floor[task], f"task {task}: epoch {new.epoch} not above the store's {floor}"
        # 1. Single owner: a new owner only after the old one let go (acknowledged) or is gone.
        if new.active is not None and new.active != old.active:
            assert new.epoch > old.epoch, f"task {task}: owner changed without a new epoch"
            if old.active is not None:
                acked = (
                    old.revoking_since is not None
                    and views[old.active].acked_generation >= old.revoking_since
                )
                assert acked or not alive(old.active), f"task {task}: taken from {old.active} without its ack"
            assert new.active in live, f"task {task}: given to {new.active}, which is not live"
        # 2. Nothing dropped (eager's stop-the-world barrier is the one documented exception).
        if new.active is None and not (config.protocol == "eager" and barrier):
            assert not live, f"task {task} unassigned although members {sorted(live)} are live"
        elif new.active is not None and not alive(new.active):
            reservation = after.reserved_for(new.active)
            assert reservation is not None and reservation.deadline > world.now, (
                f"task {task} held for lost member {new.active} without a live reservation"
            )
        # 5. No cold takeover while a warm owner lives (state-aware protocol).
        newly_revoked = new.revoking_since is not None and old.revoking_since is None
        if config.protocol == "streamapp" and newly_revoked and live and new.active is not None:
            draining = new.active >= world.app.replicas
            if not draining or config.drain_on_scale_in:
                assert new.warmups, f"task {task} revoked from a live owner with no successor"
                lag = views[new.warmups[0]].lags.get(task)
                assert lag is not None and lag <= config.acceptable_recovery_lag, (
                    f"task {task} revoked for a successor with lag {lag}"
                )
        held_by = after.reserved_for(new.active) if new.active is not None else None
        started = set(new.warmups) - set(old.warmups)
        if held_by is not None and started and config.lost_task_recovery == "delay":
            # A lost member's held tasks are pre-warmed only once half its delay has passed, and never
            # while its pod is visibly starting again.
            assert world.now >= prewarm_at(held_by.deadline, config.scheduled_rebalance_max_delay), (
                f"task {task} pre-warmed at {world.now}, before half the delay to {held_by.deadline}"
            )
            assert not views[held_by.member].returning, (
                f"task {task} pre-warmed while its owner {held_by.member} is on its way back"
            )
        elif held_by is not None and started:
            # `auto`: a restore that is expected to finish after the member is back is insurance, and
            # counts against the warmup budget like any optional copy.
            damped = {f.member for f in after.flaps if f.damped}
            insurance |= {
                (task, m) for m in started if loses_the_race(world, views, held_by, task, m, damped)
            }
        # Copies: distinct members, never the owner, within the configured counts.
        copies = (*new.standbys, *new.warmups)
        assert len(set(copies)) == len(copies) and new.active not in copies, f"task {task}: bad copies {new}"
        # Warmups run on live members; only a copy warmed ahead of an upcoming member's handoff may run
        # on one that is merely alive (retiring now, its claim keeping the copy across its restart).
        ahead = new.active is not None and new.active in views and views[new.active].upcoming
        assert all(m in live or (ahead and alive(m) and m < world.app.replicas) for m in new.warmups), (
            f"task {task}: warmup on a member that takes no copy: {new}"
        )
        live_standbys = [m for m in new.standbys if alive(m)]
        assert len(live_standbys) <= config.standby_replicas, f"task {task}: too many standbys {new.standbys}"
        assert all(alive(m) or after.reserved_for(m) for m in new.standbys), (
            f"task {task}: standby on a gone member"
        )
    check_warmup_budget(config, after, insurance)


def loses_the_race(
    world: World,
    views: dict[int, MemberView],
    held_by: Reservation,
    task: int,
    member: int,
    damped: Collection[int] = (),
) -> bool:
    """Whether a restore of `task` on `member`, started now, cannot finish before the task's owner is
    expected back (an owner visibly returning, trusted to — not damped for flapping —, not yet
    overdue; every figure measured). The restore starts from the member's copy when that is shorter."""
    owner = views[held_by.member]
    expected, rate = owner.return_seconds, views[member].restore_rate
    known = [n for n in (views[member].lags.get(task), owner.restore_rows.get(task)) if n is not None]
    rows = min(known) if known else None
    if not owner.returning or held_by.member in damped or expected is None or rate is None or rows is None:
        return False
    if views[member].lags.get(task, world.app.rebalance.acceptable_recovery_lag + 1) <= (
        world.app.rebalance.acceptable_recovery_lag
    ):
        return False
    lost_at = held_by.deadline - world.app.rebalance.scheduled_rebalance_max_delay
    overdue = world.now >= lost_at + LATE_FACTOR * expected
    return not overdue and world.now + rows / rate >= lost_at + expected


def check_warmup_budget(
    config: RebalanceConfig, after: Assignment, insurance: Collection[tuple[int, int]] = ()
) -> None:
    """The warmup budget: at most `maxWarmupReplicas` optional copies restoring on any one destination
    member, and at most `maxWarmupReplicasTotal` in all when set (a revoked task's successor has caught
    up). Under `auto` a lost member's task is down, and the restore the engine chose for it is not
    optional: not counted; one started as insurance (`insurance`: (task, member)) is."""
    reserved = {r.member for r in after.reservations}
    recovering = config.protocol == "streamapp" and config.lost_task_recovery == "auto"
    per_member: dict[int, int] = {}
    for task, t in enumerate(after.tasks):
        if t.revoking_since is None:
            for member in t.warmups:
                if recovering and t.active in reserved and (task, member) not in insurance:
                    continue
                per_member[member] = per_member.get(member, 0) + 1
    if config.protocol != "streamapp":
        assert not per_member
        return
    assert all(n <= config.max_warmup_replicas for n in per_member.values()), (
        f"warming per member {per_member}"
    )
    total = sum(per_member.values())
    assert not config.max_warmup_replicas_total or total <= config.max_warmup_replicas_total, total


def check_deadlines(world: World, before: Assignment, result: Plan, observed: list[MemberView]) -> None:
    """A member is declared timed out exactly when it let a revocation wait the whole timeout, and the
    engine asks to be woken no later than the next revocation deadline."""
    timeout = world.app.rebalance.revocation_timeout
    views = {v.id: v for v in observed}
    overdue = {
        t.active
        for t in before.tasks
        if t.active is not None
        and t.revoking_since is not None
        and t.revoking_at is not None
        and world.now >= t.revoking_at + timeout
        and views[t.active].alive
        and views[t.active].acked_generation < t.revoking_since
    }
    assert set(result.timed_out) == overdue, f"timed out {result.timed_out}, overdue {sorted(overdue)}"
    pending = [t.revoking_at for t in result.assignment.tasks if t.revoking_since is not None]
    assert all(at is not None for at in pending), "a revocation without the time it was asked"
    deadlines = [at + timeout for at in pending if at is not None]
    if deadlines:
        assert result.wake_at is not None and result.wake_at <= min(deadlines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), events)
def test_invariants_hold_over_random_histories(setup: Setup, history: list[tuple[str, int, int]]) -> None:
    world = played(setup, history)
    run(world, "plan", 0, 0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), events)
def test_plans_are_deterministic(setup: Setup, history: list[tuple[str, int, int]]) -> None:
    """7. Same inputs → same plan, whatever order the members are listed in."""
    world = played(setup, history)
    views = world.views()
    first = plan(world.app, views, world.assignment, world.now)
    again = plan(world.app, list(reversed(views)), world.assignment, world.now)
    assert first == again


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), events, st.floats(0.0, 1.0))
def test_a_plan_that_leaves_the_assignment_is_the_answer_until_its_wake_up(
    setup: Setup, history: list[tuple[str, int, int]], fraction: float
) -> None:
    """A plan that leaves the assignment as it was is the plan for the same inputs at any later time
    before its wake-up: what lets the operator reuse a plan while nothing it reads has changed
    (controller/memo.py)."""
    world = played(setup, history)
    for _ in range(6):  # to a fixpoint, where revocations and held tasks wait on their deadlines
        if not world.replan().changed:
            break
    views = world.views()
    first = plan(world.app, views, world.assignment, world.now)
    if first.assignment != world.assignment:
        return
    horizon = first.wake_at if first.wake_at is not None else world.now + 100_000.0
    later = world.now + fraction * (horizon - world.now) * (1 - 1e-9)
    assert plan(world.app, views, world.assignment, later) == first


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), events)
def test_converges_to_balance_after_the_last_event(setup: Setup, history: list[tuple[str, int, int]]) -> None:
    """3 and 6: once events stop and copies catch up, a balanced stable assignment is reached."""
    assert_converges(played(setup, history), setup)


def assert_converges(world: World, setup: Setup, slack: int = 0) -> None:
    """Every member up and steady from now on, the reservations expired: a stable assignment within
    a bound of generations (two per copy, plus `slack`), balanced, every task processed."""
    for member in world.members.values():
        member.alive = True
        member.retiring = False
        member.upcoming = False
    world.now += world.app.rebalance.scheduled_rebalance_max_delay + 1
    partitions = world.app.partitions
    standbys = world.app.rebalance.standby_replicas if world.app.rebalance.protocol == "streamapp" else 0
    bound = 2 * (partitions + partitions * standbys) + 4 + slack
    rounds = world.converge(bound, tick=world.app.rebalance.revocation_timeout)
    assert rounds <= bound, f"no stable assignment after {bound} generations"
    assert_balanced(world, setup)
    assert_processing(world)


def assert_processing(world: World) -> None:
    """Every task is processed by its owner unless the owner is deaf: none is left fenced."""
    for task, t in enumerate(world.assignment.tasks):
        owner = world.members[t.active] if t.active is not None else None
        assert owner is not None
        assert owner.deaf or task in owner.processing, f"task {task} not processed by {t.active}: {t}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), st.sets(st.integers(0, 7), min_size=1), faults)
def test_members_that_never_acknowledge_are_replaced_and_the_app_converges(
    setup: Setup, deaf: set[int], history: list[tuple[str, int, int]]
) -> None:
    """1, 2, the epoch floor and the revocation deadline with deaf members and lost intents: a task goes
    active elsewhere only after an acknowledgement or once its owner's pod is gone; after the events
    stop, the app converges once the deaf members' revocations time out, with no task left fenced."""
    world = World.start(setup.app, setup.zones, setup.capacities)
    world.converge(4 * setup.app.partitions + 4)
    for member in deaf & set(world.members):
        world.members[member].deaf = True
    for kind, member, value in history:
        run(world, kind, member, value)
    run(world, "plan", 0, 0)
    assert_converges(world, setup, slack=2 * len(world.members))


def assert_balanced(world: World, setup: Setup) -> None:
    """Balance at rest: counts within one of each member's capacity-weighted share; full copies."""
    app = world.app
    live = [m for m in sorted(world.members) if m < app.replicas]
    counts = {m: 0 for m in live}
    copies = {m: 0 for m in live}
    for task in world.assignment.tasks:
        assert task.active in counts, f"task owned by {task.active}, not a live member"
        assert task.revoking_since is None and not task.warmups
        counts[task.active] += 1
        for m in (task.active, *task.standbys):
            copies[m] += 1
    weighted = app.rebalance.protocol == "streamapp" and bool(setup.capacities)
    capacity = {m: world.members[m].capacity if weighted else 1.0 for m in live}
    total = sum(capacity.values())
    for m in live:
        share = app.partitions * capacity[m] / total
        assert share - 1 < counts[m] < share + 1, f"member {m} owns {counts[m]}, share {share:.2f}: {counts}"
    if app.rebalance.protocol == "streamapp":
        wanted = min(len(live) - 1, app.rebalance.standby_replicas)
        assert all(len(t.standbys) == wanted for t in world.assignment.tasks)
        if not weighted:
            assert max(copies.values()) - min(copies.values()) <= 1, f"copies unbalanced: {copies}"


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(2, 5),
    extra=st.integers(0, 12),
    delay=st.sampled_from([30.0, 300.0]),
    victim=st.integers(0, 4),
    elapsed=st.floats(0.0, 0.99),
    standbys=st.integers(0, 1),
    returning=st.booleans(),
)
def test_held_tasks_are_prewarmed_from_half_the_delay_on(
    replicas: int, extra: int, delay: float, victim: int, elapsed: float, standbys: int, returning: bool
) -> None:
    """`lostTaskRecovery: delay`: a lost member's tasks are held with nothing warming elsewhere during the first half of the
    delay (a bounce wastes nothing), and pre-warmed from then on unless a standby is already warm (a
    member that never returns still hands them to warm copies) or its pod is visibly starting again
    (`returning`: nothing is pre-warmed for it at all); every plan keeps the invariants."""
    config = RebalanceConfig(
        scheduled_rebalance_max_delay=delay,
        standby_replicas=standbys,
        failover_to_standby=False,
        lost_task_recovery="delay",
    )
    world = World.start(AppConfig(replicas + extra, replicas, config))
    world.converge(100)
    world.kill(victim % replicas)
    world.members[victim % replicas].returning = returning
    run(world, "plan", 0, 0)
    world.now = elapsed * delay
    run(world, "plan", 0, 0)
    warming = any(t.warmups for t in world.assignment.tasks)
    if world.now < delay / 2 or returning:
        assert not warming
    elif not standbys:  # a standby of a held task is already warm: nothing to pre-warm
        assert warming


@settings(max_examples=150, deadline=None)
@given(
    replicas=st.integers(2, 5),
    extra=st.integers(0, 100),
    victim=st.integers(0, 4),
    rows=st.lists(st.integers(0, 400_000), min_size=1, max_size=17),
    rate=st.sampled_from([None, 1_000.0, 10_000.0, 100_000.0]),
    expected=st.sampled_from([None, 5.0, 40.0, 200.0]),
    returning=st.booleans(),
    elapsed=st.floats(0.0, 400.0),
    budget=st.integers(1, 3),
)
def test_lost_tasks_wait_only_for_a_member_expected_back_before_a_restore(
    replicas: int,
    extra: int,
    victim: int,
    rows: list[int],
    rate: float | None,
    expected: float | None,
    returning: bool,
    elapsed: float,
    budget: int,
) -> None:
    """`auto`, both ways, at each held task's place in a restore queue: a destination's restores share
    its throughput, so it restores what it restores already (tasks it took over, copies of held tasks
    under way), then held tasks shortest first, each on the destination where it would end first
    (`queue_places`, a model of the rule written from the module's docstring, not from its code).
    Every held task whose place ends before its member is back — or whose member's return is unknown,
    overdue or not visibly coming — is restored elsewhere: started now (taken over or warming) when
    what is ahead of it ends within the overlap, else queued (held, nothing restoring it, reported
    as restoring). Every other held task waits for its member (not reported as restoring; a copy of
    it is insurance): its member's return is known, not overdue, and its restore would end at or
    after it on every destination. With up to ~50 tasks per member and a warmup budget of 1 to 3,
    which paces only optional copies; every plan keeps the invariants. Every member restores at the
    same rate and holds no copy of the lost member's tasks, so which destination takes a task
    changes no queue's length: the model's places are the engine's whatever ties it breaks."""
    config = RebalanceConfig(scheduled_rebalance_max_delay=300.0, max_warmup_replicas=budget)
    world = World.start(AppConfig(replicas + extra, replicas, config))
    world.converge(100)
    for task, t in enumerate(world.assignment.tasks):
        assert t.active is not None
        world.members[t.active].restore_rows[task] = rows[task % len(rows)]
    for member in world.members.values():
        member.restore_rate = rate
    lost = victim % replicas
    held = [task for task, t in enumerate(world.assignment.tasks) if t.active == lost]
    world.kill(lost)
    world.members[lost].returning = returning
    world.members[lost].return_seconds = expected
    run(world, "plan", 0, 0)
    world.now = min(elapsed, 299.0)
    before, views = world.assignment, world.views()
    reservation = before.reserved_for(lost)
    result = world.replan()
    check_step(world, before, result.assignment, views)
    if reservation is None:
        return
    lost_at = reservation.deadline - 300.0
    owner = views[lost]
    known = owner.returning and owner.return_seconds is not None
    overdue = known and world.now >= lost_at + LATE_FACTOR * (owner.return_seconds or 0)
    back = lost_at + (owner.return_seconds or 0) if known and not overdue else None
    started, queued, waiting = queue_places(world, before, views, lost, back)
    restoring = {t for r in result.lost if r.member == lost for t in r.restoring}
    for task in (t for t in held if before.tasks[t].active == lost):
        t = result.assignment.tasks[task]
        if task in started:
            assert t.active != lost or t.warmups, f"task {task}: its restore ends first, yet not started"
            assert task in restoring
        elif task in queued:
            assert t.active == lost and not t.warmups, f"task {task} started before its turn: {t}"
            assert task in restoring, f"task {task} is queued but not reported as restoring"
        else:
            assert task in waiting
            assert back is not None, f"task {task} waits for {lost}, whose return is unknown or overdue"
            assert t.active == lost and task not in restoring, (
                f"task {task} restored elsewhere although its place ends at {waiting[task]}, after {back}"
            )


def queue_places(
    world: World, before: Assignment, views: list[MemberView], lost: int, back: float | None
) -> tuple[set[int], set[int], dict[int, float]]:
    """The lost member's held tasks in their destinations' restore queues (every member restoring at
    the same measured rate, none holding a copy of them): which start now, which are queued to be
    restored once what is ahead of them is about done, and which wait for their member — with when
    their restore would end at their place at best. A destination restores first the tasks it owns
    by their reported lag (in full when not reported: it took them over), then the held tasks already
    warming on it; then each other held task, shortest first, goes to the destination with the least
    ahead of it, and is restored there when it ends before `back` (None: the member is not expected).
    It starts now when what is ahead of it ends within `OVERLAP_SECONDS`, or when nothing is measured."""
    rate = views[0].restore_rate
    held = [task for task, t in enumerate(before.tasks) if t.active == lost]
    sizes = {task: max(v.restore_rows.get(task, 0) for v in views) for task in range(len(before.tasks))}
    live = [m for m in range(world.app.replicas) if views[m].alive]
    ahead = dict.fromkeys(live, 0.0)
    for task, t in enumerate(before.tasks):
        for member in (t.active, *t.standbys):
            if member in ahead:
                lag = views[member].lags.get(task)
                ahead[member] += lag if lag is not None else sizes[task]
    started: set[int] = set()
    queued: set[int] = set()
    waiting: dict[int, float] = {}
    if not live:
        return started, queued, {task: float("inf") for task in held}
    for task in held:
        warming = [m for m in before.tasks[task].warmups if m in ahead]
        if warming:
            started.add(task)
            ahead[warming[0]] += sizes[task]
    for task in sorted((t for t in held if t not in started), key=lambda t: (sizes[t], t)):
        member = min(ahead, key=lambda m: ahead[m])
        if rate is None:
            started.add(task)  # nothing measured: no estimate to wait on, nothing to pace by
            continue
        end = world.now + (ahead[member] + sizes[task]) / rate if sizes[task] else world.now
        if back is not None and end >= back:
            waiting[task] = end
            continue
        pace = sizes[task] and ahead[member] > rate * OVERLAP_SECONDS
        (queued if pace else started).add(task)
        ahead[member] += sizes[task]
    return started, queued, waiting
