"""Rolling updates: which member pod is replaced next and when (pure), and the engine handing a
retiring member's tasks off before its pod goes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants import check_step
from world import World

from streamapp.rebalance import (
    AppConfig,
    Assignment,
    MemberView,
    RebalanceConfig,
    Reservation,
    TaskAssignment,
)
from streamapp.rebalance.costs import Costs
from streamapp.rebalance.rollout import (
    HANDOFF_FLOOR_SECONDS,
    WARMING_LIMIT,
    MemberPod,
    RolloutConfig,
    at_rest,
    handoff_left,
    rollout_step,
    settled_step,
    warming_seconds,
)

NEW = "new"


def pods(*specs: tuple[int, str, bool, float | None]) -> dict[int, MemberPod]:
    return {m: MemberPod(m, rev, ready, since) for m, rev, ready, since in specs}


def three_old() -> dict[int, MemberPod]:
    return pods((0, "old", True, None), (1, "old", True, None), (2, "old", True, None))


def test_nothing_to_do_when_every_pod_runs_the_update() -> None:
    step = rollout_step(
        pods((0, NEW, True, None), (1, NEW, True, None)), 2, NEW, {0: 3}, RolloutConfig(), 0.0
    )
    assert (step.retiring, step.delete, step.updated, step.rolling) == ({}, (), 2, False)


def test_the_highest_member_hands_off_first_and_alone() -> None:
    step = rollout_step(three_old(), 3, NEW, {0: 4, 1: 4, 2: 4}, RolloutConfig(), 10.0)
    assert step.retiring == {2: 10.0}
    assert step.delete == ()
    assert step.outdated == (0, 1, 2)
    assert step.wake_at == 10.0 + RolloutConfig().handoff_timeout


def test_a_handoff_keeps_its_start_and_its_pod_goes_once_it_owns_nothing() -> None:
    started = pods((0, "old", True, None), (1, "old", True, None), (2, "old", True, 10.0))
    busy = rollout_step(started, 3, NEW, {0: 6, 1: 5, 2: 1}, RolloutConfig(), 50.0)
    assert (busy.retiring, busy.delete) == ({2: 10.0}, ())
    done = rollout_step(started, 3, NEW, {0: 6, 1: 6}, RolloutConfig(), 60.0)
    assert (done.retiring, done.delete) == ({}, (2,))


def test_a_handoff_that_takes_too_long_deletes_the_pod_anyway() -> None:
    started = pods((0, "old", True, None), (1, "old", True, None), (2, "old", True, 10.0))
    config = RolloutConfig(handoff_timeout=60.0)
    assert rollout_step(started, 3, NEW, {2: 1}, config, 69.0).delete == ()
    assert rollout_step(started, 3, NEW, {2: 1}, config, 70.0).delete == (2,)


def test_a_handoff_its_successors_are_measured_to_finish_soon_outlasts_the_timeout() -> None:
    """Member 2 hands off its two tasks, both warming on member 1, which restores 1,000 rows a second
    for both together: 30,000 rows of lag left is 30 s. Past the 60-s timeout its pod stays until then
    (plus a report and an acknowledgement); a handoff whose copies need longer than another timeout,
    or whose end is not measured, is cut at the timeout; none outlasts twice the timeout."""
    started = pods((0, "old", True, None), (1, "old", True, None), (2, "old", True, 10.0))
    config = RolloutConfig(handoff_timeout=60.0)
    tasks = (TaskAssignment(2, 1, warmups=(1,)), TaskAssignment(2, 1, warmups=(1,)), TaskAssignment(0, 1))
    views = [
        MemberView(0),
        MemberView(1, lags={0: 20_000, 1: 10_000}, restore_rate=1_000.0),
        MemberView(2, retiring=True),
    ]
    assignment = replace(Assignment.empty(3), tasks=tasks)
    assert handoff_left(assignment, views) == {2: 30.0}
    soon = rollout_step(started, 3, NEW, {2: 2}, config, 70.0, left={2: 30.0})
    assert (soon.retiring, soon.delete) == ({2: 10.0}, ()) and soon.wake_at is not None
    assert 100.0 <= soon.wake_at <= 130.0 + 10.0
    assert rollout_step(started, 3, NEW, {2: 2}, config, 70.0, left={2: 61.0}).delete == (2,)
    assert rollout_step(started, 3, NEW, {2: 2}, config, 70.0).delete == (2,)
    assert rollout_step(started, 3, NEW, {2: 2}, config, 130.0, left={2: 1.0}).delete == (2,)
    unmeasured = [*views[:1], MemberView(1, lags={0: 20_000}, restore_rate=1_000.0), views[2]]
    assert handoff_left(assignment, unmeasured) == {}


def test_the_next_member_waits_until_the_replaced_one_is_ready() -> None:
    replacing = pods((0, "old", True, None), (1, "old", True, None), (2, NEW, False, None))
    step = rollout_step(replacing, 3, NEW, {0: 6, 1: 6}, RolloutConfig(), 0.0)
    assert (step.retiring, step.delete, step.updated) == ({}, (), 1)
    gone = pods((0, "old", True, None), (1, "old", True, None))
    assert rollout_step(gone, 3, NEW, {0: 6, 1: 6}, RolloutConfig(), 0.0).retiring == {}
    back = pods((0, "old", True, None), (1, "old", True, None), (2, NEW, True, None))
    assert rollout_step(back, 3, NEW, {0: 6, 1: 6}, RolloutConfig(), 5.0).retiring == {1: 5.0}


def test_max_unavailable_replaces_that_many_at_once() -> None:
    step = rollout_step(three_old(), 3, NEW, {0: 4, 1: 4, 2: 4}, RolloutConfig(max_unavailable=2), 0.0)
    assert set(step.retiring) == {1, 2}


def test_an_outdated_pod_that_is_not_ready_is_replaced_at_once() -> None:
    broken = pods((0, "old", True, None), (1, "old", False, None), (2, "old", True, None))
    step = rollout_step(broken, 3, NEW, {0: 4, 2: 4}, RolloutConfig(), 0.0)
    assert (step.retiring, step.delete) == ({}, (1,))


def test_in_place_deletes_without_a_handoff() -> None:
    step = rollout_step(three_old(), 3, NEW, {0: 4, 1: 4, 2: 4}, RolloutConfig(strategy="inPlace"), 0.0)
    assert (step.retiring, step.delete) == ({}, (2,))


def test_auto_restarts_in_place_with_nowhere_to_go_or_a_cold_protocol() -> None:
    alone = rollout_step(pods((0, "old", True, None)), 1, NEW, {0: 4}, RolloutConfig(), 0.0)
    assert (alone.retiring, alone.delete) == ({}, (0,))
    cold = rollout_step(three_old(), 3, NEW, {0: 4, 1: 4, 2: 4}, RolloutConfig(), 0.0, warm=False)
    assert (cold.retiring, cold.delete) == ({}, (2,))
    forced = RolloutConfig(strategy="handoff")
    assert rollout_step(three_old(), 3, NEW, {2: 4}, forced, 0.0, warm=False).retiring == {2: 0.0}


FAST = Costs(restart={0: 3.1, 1: 3.1, 2: 3.1}, handoff=4.8, claims=True)
EVERY_TASK = {0: 4, 1: 4, 2: 4}


def auto(costs: Costs, warm: bool = True) -> tuple[dict[int, float], tuple[int, ...], str]:
    """What `auto` does with member 2 of three, each owning 4 tasks, under `costs`."""
    step = rollout_step(three_old(), 3, NEW, EVERY_TASK, RolloutConfig(), 0.0, warm, costs)
    return dict(step.retiring), step.delete, step.reasons[2]


def test_auto_restarts_in_place_a_member_on_a_claim_whose_measured_restart_is_cheaper() -> None:
    assert auto(FAST) == ({}, (2,), "measured restart 3.1 s < handoff 4.8 s")


def test_auto_hands_off_when_the_measured_restart_costs_as_much_or_more() -> None:
    slow = Costs(restart={2: 20.3}, handoff=4.8, claims=True)
    assert auto(slow) == ({2: 0.0}, (), "measured restart 20.3 s >= handoff 4.8 s")
    assert auto(Costs(restart={2: 4.8}, handoff=4.8, claims=True))[0] == {2: 0.0}


def test_auto_hands_off_while_either_cost_is_unknown() -> None:
    unmeasured = Costs(restart={0: 1.0, 1: 1.0}, handoff=4.8, claims=True)
    assert auto(unmeasured) == ({2: 0.0}, (), "its restart time is not measured yet")
    no_handoff = Costs(restart={2: 3.0}, claims=True)
    assert auto(no_handoff) == ({2: 0.0}, (), "measured restart 3.0 s, handoff time not measured yet")
    assert auto(Costs())[0] == {2: 0.0}


def test_auto_restarts_in_place_a_member_no_handoff_could_beat() -> None:
    """A restart measured within the least a handoff ever costs (a batch on each side and a round
    trip) needs no handoff measured first."""
    quick = Costs(restart={2: HANDOFF_FLOOR_SECONDS}, claims=True)
    assert auto(quick) == ({}, (2,), "measured restart 1.0 s: no handoff is quicker")


def test_auto_hands_off_a_member_without_a_claim_however_fast_it_restarted() -> None:
    """An emptyDir is new with every pod: the next restart restores every task in full, whatever the
    last one (perhaps a container restart that kept it) measured."""
    in_empty_dir = Costs(restart=FAST.restart, handoff=FAST.handoff, claims=False)
    retiring, delete, why = auto(in_empty_dir)
    assert (retiring, delete) == ({2: 0.0}, ()) and "not on a claim" in why


def test_warming_seconds_spreads_a_members_restore_volume_over_its_successors() -> None:
    """Member 2 owns tasks 0 and 1 (1,000 rows each in full, by its own report); member 0 holds a copy
    of task 0 100 rows behind. Member 1 restores 100 rows a second, member 0 is not measured and counts
    at the median: (100 + 1,000) rows over 200 rows a second. A task of unknown size, or successors of
    unknown throughput, leave the member out; so does a member owning nothing."""
    tasks = (TaskAssignment(2, 1), TaskAssignment(2, 1), TaskAssignment(0, 1))
    assignment = replace(Assignment.empty(3), tasks=tasks)
    views = [
        MemberView(0, lags={0: 100}),
        MemberView(1, restore_rate=100.0),
        MemberView(2, restore_rows={0: 1_000, 1: 1_000}),
    ]
    assert warming_seconds(assignment, views, 3)[2] == pytest.approx(5.5)
    assert 1 not in warming_seconds(assignment, views, 3)
    unsized = [views[0], views[1], MemberView(2, restore_rows={0: 1_000})]
    assert 2 not in warming_seconds(assignment, unsized, 3)
    unmeasured = [views[0], MemberView(1), views[2]]
    assert warming_seconds(assignment, unmeasured, 3) == {}
    leaving = [replace(views[0], retiring=True), *views[1:]]
    assert warming_seconds(assignment, leaving, 3)[2] == pytest.approx(2_000 / 100.0), (
        "a retiring member takes none"
    )


def test_auto_restarts_in_place_a_member_whose_tasks_would_take_too_long_to_warm_elsewhere() -> None:
    """A handoff of member 2 expected to warm its tasks in more than `WARMING_LIMIT` times its restart
    is not worth holding the rollout for: its restart — measured, or else the app's pod start — wins,
    even against a handoff measured at a second. Within the limit the measured costs decide as before."""
    claim = Costs(restart={2: 40.0}, handoff=1.0, claims=True)
    over = {2: WARMING_LIMIT * 40.0 + 1.0}
    step = rollout_step(three_old(), 3, NEW, EVERY_TASK, RolloutConfig(), 0.0, True, claim, warming=over)
    assert (step.retiring, step.delete) == ({}, (2,))
    assert step.reasons[2] == "warming its tasks elsewhere would take ~81 s, over 2x its restart (40 s)"
    within = {2: WARMING_LIMIT * 40.0}
    assert rollout_step(
        three_old(), 3, NEW, EVERY_TASK, RolloutConfig(), 0.0, True, claim, warming=within
    ).retiring == {2: 0.0}
    started = Costs(handoff=1.0, claims=True, pod_start=20.0)
    assert rollout_step(
        three_old(), 3, NEW, EVERY_TASK, RolloutConfig(), 0.0, True, started, warming={2: 41.0}
    ).delete == (2,)
    assert rollout_step(
        three_old(), 3, NEW, EVERY_TASK, RolloutConfig(), 0.0, True, started, warming={2: 40.0}
    ).retiring == {2: 0.0}
    empty_dir = replace(claim, claims=False)
    assert rollout_step(
        three_old(), 3, NEW, EVERY_TASK, RolloutConfig(), 0.0, True, empty_dir, warming=over
    ).retiring == {2: 0.0}
    forced = RolloutConfig(strategy="handoff")
    assert rollout_step(three_old(), 3, NEW, EVERY_TASK, forced, 0.0, True, claim, warming=over).retiring == {
        2: 0.0
    }


def test_the_warm_protocol_and_a_successor_come_before_the_costs() -> None:
    slow = Costs(restart={0: 60.0, 2: 60.0}, handoff=1.0, claims=True)
    assert auto(slow, warm=False)[:2] == ({}, (2,))
    alone = rollout_step(pods((0, "old", True, None)), 1, NEW, {0: 4}, RolloutConfig(), 0.0, True, slow)
    assert (alone.retiring, alone.delete) == ({}, (0,))
    assert alone.reasons[0] == "no other ready member can take its tasks"


def test_forced_strategies_ignore_the_costs() -> None:
    handoff = rollout_step(
        three_old(), 3, NEW, EVERY_TASK, RolloutConfig(strategy="handoff"), 0.0, True, FAST
    )
    assert (handoff.retiring, handoff.reasons[2]) == ({2: 0.0}, "rollingUpdate.strategy is handoff")
    slow = Costs(restart={2: 60.0}, handoff=1.0, claims=True)
    in_place = rollout_step(
        three_old(), 3, NEW, EVERY_TASK, RolloutConfig(strategy="inPlace"), 0.0, True, slow
    )
    assert (in_place.delete, in_place.reasons[2]) == ((2,), "rollingUpdate.strategy is inPlace")


def test_auto_chooses_per_member() -> None:
    mixed = Costs(restart={1: 2.0, 2: 9.0}, handoff=4.8, claims=True)
    step = rollout_step(three_old(), 3, NEW, EVERY_TASK, RolloutConfig(max_unavailable=2), 0.0, True, mixed)
    assert (step.retiring, step.delete) == ({2: 0.0}, (1,))


def test_a_handoff_under_way_ends_in_a_restart_once_the_restart_is_measured_cheaper() -> None:
    started = pods((0, "old", True, None), (1, "old", True, None), (2, "old", True, 10.0))
    step = rollout_step(started, 3, NEW, {2: 2}, RolloutConfig(), 20.0, True, FAST)
    assert (step.retiring, step.delete) == ({}, (2,))


def test_every_member_the_step_acts_on_says_why() -> None:
    started = pods((0, "old", True, None), (1, "old", True, None), (2, "old", True, 10.0))
    done = rollout_step(started, 3, NEW, {0: 6, 1: 6}, RolloutConfig(), 20.0)
    assert done.reasons == {2: "its tasks are handed off"}
    late = rollout_step(started, 3, NEW, {2: 1}, RolloutConfig(handoff_timeout=60.0), 70.0)
    assert late.reasons == {2: "its handoff did not finish within handoffTimeout (60 s)"}
    idle = rollout_step(three_old(), 3, NEW, {0: 6, 1: 6}, RolloutConfig(), 0.0)
    assert (idle.delete, idle.reasons) == ((2,), {2: "it owns no active task to hand off"})
    waiting = rollout_step(three_old(), 3, NEW, EVERY_TASK, RolloutConfig(), 0.0)
    assert set(waiting.reasons) == {2}, "members left for later are not chosen for yet"


@settings(max_examples=200, deadline=None)
@given(
    restart=st.none() | st.floats(0.0, 100.0),
    handoff=st.none() | st.floats(0.0, 100.0),
    claims=st.booleans(),
    warm=st.booleans(),
    strategy=st.sampled_from(["auto", "handoff", "inPlace"]),
)
def test_a_member_restarts_in_place_only_when_asked_or_measured_cheaper(
    restart: float | None, handoff: float | None, claims: bool, warm: bool, strategy: str
) -> None:
    """With somewhere to go, a member owning tasks restarts in place exactly when `inPlace` is asked
    for, or `auto` cannot warm a successor, or it is on a claim and its measured restart is the
    cheaper — than the measured handoff, or with none measured than any handoff could be; it hands
    off otherwise."""
    costs = Costs({2: restart} if restart is not None else {}, handoff, claims)
    config = RolloutConfig(strategy=strategy)  # type: ignore[arg-type]
    step = rollout_step(three_old(), 3, NEW, EVERY_TASK, config, 0.0, warm, costs)
    bound = handoff if handoff is not None else HANDOFF_FLOOR_SECONDS
    quicker = restart is not None and (restart < bound or (handoff is None and restart == bound))
    cheaper = claims and quicker
    in_place = strategy == "inPlace" or (strategy == "auto" and (not warm or cheaper))
    assert step.delete == ((2,) if in_place else ())
    assert step.retiring == ({} if in_place else {2: 0.0})
    assert set(step.reasons) == {2}


def test_paused_starts_nothing_and_abandons_a_handoff() -> None:
    started = pods((0, "old", True, None), (1, "old", True, None), (2, "old", True, 10.0))
    step = rollout_step(started, 3, NEW, {2: 4}, RolloutConfig(paused=True), 20.0)
    assert (step.retiring, step.delete, step.rolling) == ({}, (), True)


def test_members_removed_by_scale_in_are_not_rolled() -> None:
    step = rollout_step(three_old(), 2, NEW, {0: 6, 1: 6}, RolloutConfig(), 0.0)
    assert step.outdated == (0, 1)
    assert 2 not in step.retiring and 2 not in step.delete


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    partitions=st.integers(1, 24),
    replicas=st.integers(2, 6),
    retiring=st.integers(0, 5),
    standbys=st.integers(0, 1),
    budget=st.integers(1, 3),
)
def test_a_retiring_member_hands_every_task_to_a_warm_successor(
    partitions: int, replicas: int, retiring: int, standbys: int, budget: int
) -> None:
    """Invariants 1, 2 and 5 hold while a member retires; it ends owning nothing (its pod may go),
    every task revoked from it went to a caught-up successor, and no task was ever held or dropped."""
    retiring %= replicas
    config = RebalanceConfig(standby_replicas=standbys, max_warmup_replicas=budget)
    world = World.start(AppConfig(partitions, replicas, config))
    world.converge(4 * partitions + 4)
    world.members[retiring].retiring = True
    for _ in range(4 * partitions + 4):
        before, views = world.assignment, world.views()
        result = world.replan()
        check_step(world, before, result.assignment, views)
        assert all(t.active is not None for t in result.assignment.tasks)
        assert not result.assignment.reservations
        for member in sorted(world.members):
            world.apply(member)
            world.catch_up(member)
        assert not world.double_owned()
        if not result.changed:
            break
    owners = [t.active for t in world.assignment.tasks]
    assert retiring not in owners
    assert all(t.revoking_since is None for t in world.assignment.tasks)
    counts = [owners.count(m) for m in range(replicas) if m != retiring]
    assert max(counts) - min(counts) <= 1


def test_a_member_whose_executor_never_reported_is_replaced_at_once() -> None:
    """An executor that never reported (a broken image, a process that never started) processes
    nothing: its pod is replaced at once, not handed off for handoffTimeout — with the others too,
    since none of them holds anything up."""
    broken = {m: MemberPod(m, "old", True, reporting=False) for m in range(3)}
    step = rollout_step(broken, 3, NEW, {0: 4, 1: 4, 2: 4}, RolloutConfig(), 10.0)
    assert (step.retiring, step.delete) == ({}, (0, 1, 2))
    assert step.reasons[2] == "its executor has not reported: it processes nothing to hand off"


def test_the_next_member_waits_for_the_app_to_settle_at_most_a_handoff_timeout() -> None:
    """Member 2 is back on the new revision (ready at 100 s) and its tasks are still to come back: the
    next member is taken only once the assignment is at rest, or handoffTimeout after 100 s."""
    back = {
        0: MemberPod(0, "old", True),
        1: MemberPod(1, "old", True),
        2: MemberPod(2, NEW, True, ready_since=100.0),
    }
    config = RolloutConfig(handoff_timeout=60.0)
    waiting = rollout_step(back, 3, NEW, {0: 6, 1: 6}, config, 120.0, settled=False)
    assert (waiting.retiring, waiting.delete, waiting.wake_at) == ({}, (), 160.0)
    assert rollout_step(back, 3, NEW, {0: 6, 1: 6}, config, 160.0, settled=False).retiring == {1: 160.0}
    assert rollout_step(back, 3, NEW, {0: 4, 1: 4, 2: 4}, config, 120.0, settled=True).retiring == {1: 120.0}


def test_an_assignment_is_at_rest_once_every_live_member_owns_its_share() -> None:
    """Nothing in flight, no reservation, and no live member short of its share by more than a task."""

    def owning(*owners: int, **fields: object) -> Assignment:
        return Assignment(tasks=tuple(TaskAssignment(active=m, epoch=1) for m in owners), **fields)  # type: ignore[arg-type]

    views = [MemberView(0), MemberView(1), MemberView(2)]
    assert at_rest(owning(0, 1, 2, 0, 1, 2), views, 3)
    assert at_rest(owning(0, 1, 2, 0, 1, 1), views, 3), "a task more or less is balance"
    assert not at_rest(owning(0, 1, 0, 0, 1, 1), views, 3), "member 2 back, owning nothing yet"
    assert at_rest(owning(0, 1, 0, 0, 1, 1), views, 2), "member 2 is not wanted"
    lost = [MemberView(0), MemberView(1), MemberView(2, alive=False)]
    assert not at_rest(owning(0, 1, 2, 0, 1, 2, reservations=(Reservation(2, 300.0),)), lost, 3)
    warming = owning(0, 1, 2, 0, 1, 2)
    warming = replace(warming, tasks=(replace(warming.tasks[0], warmups=(1,)), *warming.tasks[1:]))
    assert not at_rest(warming, views, 3), "a handoff in flight"
    ahead = [MemberView(0, upcoming=True), MemberView(1), MemberView(2)]
    assert at_rest(warming, ahead, 3), "a copy warmed ahead of member 0's handoff waits for its turn"
    restoring = [MemberView(0, lags={3: 120_000}), MemberView(1), MemberView(2)]
    assert not at_rest(owning(0, 1, 2, 0, 1, 2), restoring, 3), "member 0 still restores task 3"
    processing = [MemberView(0, lags={3: 0}), MemberView(1, lags={0: 50}), MemberView(2)]
    assert at_rest(owning(0, 1, 2, 0, 1, 2), processing, 3), "a copy's lag is not an owner's restore"


def test_the_members_handed_off_next_are_upcoming_when_state_is_on_claims() -> None:
    """While member 2 hands off, member 1 (the next, by id) is upcoming: copies of its tasks warm
    ahead. Never more than maxUnavailable, never one restarting in place, and only on claims: a copy
    warmed on the member handing off now must survive its restart."""
    claims = Costs(claims=True)
    step = rollout_step(three_old(), 3, NEW, {0: 4, 1: 4, 2: 4}, RolloutConfig(), 0.0, costs=claims)
    assert (step.retiring, step.upcoming) == ({2: 0.0}, (1,))
    two = RolloutConfig(max_unavailable=2)
    four = {**three_old(), 3: MemberPod(3, "old", True)}
    step = rollout_step(four, 4, NEW, {m: 3 for m in range(4)}, two, 0.0, costs=claims)
    assert (set(step.retiring), step.upcoming) == ({2, 3}, (1, 0))
    assert rollout_step(three_old(), 3, NEW, {0: 4, 1: 4, 2: 4}, RolloutConfig(), 0.0).upcoming == ()
    in_place = RolloutConfig(strategy="inPlace")
    assert rollout_step(three_old(), 3, NEW, {0: 4}, in_place, 0.0, costs=claims).upcoming == ()
    cheap = Costs(restart={0: 0.5, 1: 0.5, 2: 0.5}, claims=True)
    assert rollout_step(three_old(), 3, NEW, {0: 4}, RolloutConfig(), 0.0, costs=cheap).upcoming == ()


def _round(world: World) -> bool:
    """One planning step checked against the invariants, then every member applies and catches up;
    whether the plan changed anything."""
    before, views = world.assignment, world.views()
    result = world.replan()
    check_step(world, before, result.assignment, views)
    for member in sorted(world.members):
        world.apply(member)
        world.catch_up(member)
    return result.changed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    partitions=st.integers(2, 24),
    replicas=st.integers(3, 6),
    budget=st.integers(1, 3),
    pause=st.integers(0, 8),
    capacities=st.sampled_from([(), (1.0, 2.0)]),
)
def test_copies_warm_ahead_of_the_next_handoff_where_it_will_put_the_tasks(
    partitions: int, replicas: int, budget: int, pause: int, capacities: tuple[float, ...]
) -> None:
    """The highest member retires and the next one is upcoming: the invariants hold every step and no
    task leaves the upcoming member. Once the first is back and the app at rest, the upcoming member
    retires in turn: every task it hands off that had a copy warmed ahead goes to that copy (none is
    thrown away), and the app ends balanced."""
    config = RebalanceConfig(max_warmup_replicas=budget)
    world = World.start(AppConfig(partitions, replicas, config), capacities=capacities)
    world.converge(4 * partitions + 4)
    current, upcoming = replicas - 1, replicas - 2
    world.members[current].retiring = True
    world.members[upcoming].upcoming = True
    mine = {t for t, a in enumerate(world.assignment.tasks) if a.active == upcoming}
    for _ in range(pause + 1):
        _round(world)
        assert {t for t, a in enumerate(world.assignment.tasks) if a.active == upcoming} >= mine
    world.members[current].retiring = False
    for _ in range(4 * partitions + 4):
        if not _round(world):
            break
    assert at_rest(world.assignment, world.views(), replicas)
    warmed = {t: world.assignment.tasks[t].warmups for t in mine}
    world.members[upcoming].upcoming = False
    world.members[upcoming].retiring = True
    for _ in range(4 * partitions + 4):
        if not _round(world):
            break
    owners = [t.active for t in world.assignment.tasks]
    assert upcoming not in owners
    assert all(owners[t] in warmed[t] for t in mine if warmed[t]), (warmed, owners)


@pytest.mark.parametrize("replicas", [3, 4, 6])
def test_the_retiring_member_warms_its_share_of_the_next_members_tasks(replicas: int) -> None:
    """Each of the others will own one more of the next member's tasks once it is gone, the member
    handing off now included: each warms one ahead — the one handing off in the gap its own handoff
    leaves it, the others once that handoff is done."""
    partitions = replicas * (replicas - 1)
    world = World.start(AppConfig(partitions, replicas, RebalanceConfig(max_warmup_replicas=1)))
    world.converge(4 * partitions + 4)
    current, upcoming = replicas - 1, replicas - 2
    world.members[current].retiring = True
    world.members[upcoming].upcoming = True
    mine = {t for t, a in enumerate(world.assignment.tasks) if a.active == upcoming}
    _round(world)
    assert [m for t in mine for m in world.assignment.tasks[t].warmups] == [current]
    for _ in range(4 * partitions + 4):
        if not _round(world):
            break
    hosts = sorted(m for t in mine for m in world.assignment.tasks[t].warmups)
    assert hosts == [m for m in range(replicas) if m != upcoming]


def test_copies_warmed_ahead_do_not_hold_the_next_member_back_though_the_shell_forgets_them() -> None:
    """Member 2 is back on the new revision and at rest but for copies of member 1's tasks warming
    ahead on members 0 and 2. The shell's views do not say member 1 is upcoming (it keeps no memory
    of the last step): the step still takes member 1 now, not after handoffTimeout."""
    pods = {
        0: MemberPod(0, "old", True),
        1: MemberPod(1, "old", True),
        2: MemberPod(2, NEW, True, ready_since=100.0),
    }
    tasks = [TaskAssignment(active=m, epoch=1) for m in (0, 1, 2, 0, 1, 2)]
    tasks[1] = replace(tasks[1], warmups=(0,))
    tasks[4] = replace(tasks[4], warmups=(2,))
    warming = Assignment(generation=3, tasks=tuple(tasks))
    views = [MemberView(0), MemberView(1), MemberView(2)]
    claims = Costs(claims=True)
    step = settled_step(pods, 3, NEW, RolloutConfig(), 120.0, True, claims, warming, views)
    assert (step.retiring, step.upcoming) == ({1: 120.0}, (0,))
    balancing = replace(warming, tasks=(replace(tasks[0], warmups=(2,)), *tasks[1:]))
    held = settled_step(pods, 3, NEW, RolloutConfig(), 120.0, True, claims, balancing, views)
    assert (held.retiring, held.upcoming) == ({}, (1,)), "a balance warmup still holds it back"
