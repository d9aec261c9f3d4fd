"""Unit tests of the engine's protocol rules, one behaviour each."""

from __future__ import annotations

from world import World

from streamapp.rebalance import (
    AppConfig,
    Assignment,
    EventKind,
    MemberView,
    RebalanceConfig,
    member_targets,
    plan,
)


def settled(partitions: int, replicas: int, **rebalance: object) -> World:
    world = World.start(AppConfig(partitions, replicas, RebalanceConfig(**rebalance)))  # type: ignore[arg-type]
    world.converge(50)
    return world


def kinds(world: World) -> set[EventKind]:
    return {e.kind for e in world.history[-1].events}


def test_first_plan_balances_every_task_with_epoch_one() -> None:
    result = plan(AppConfig(12, 3), [MemberView(i) for i in range(3)], Assignment(), now=0)
    targets = member_targets(result.assignment)
    assert sorted(len(t.active) for t in targets.values()) == [4, 4, 4]
    assert all(t.epoch == 1 for t in result.assignment.tasks)
    assert result.changed and result.assignment.generation == 1


def test_bounce_within_delay_keeps_tasks_and_moves_nothing() -> None:
    """`lostTaskRecovery: delay`: a lost member's tasks wait for it (Kafka's fixed delay)."""
    world = settled(12, 3, scheduled_rebalance_max_delay=300.0, lost_task_recovery="delay")
    before = world.assignment
    world.kill(1)
    lost = world.replan()
    assert EventKind.MEMBER_LOST in kinds(world)
    assert lost.wake_at == 150.0, "wakes up to pre-warm once half the delay has passed"
    assert [t.active for t in lost.assignment.tasks] == [t.active for t in before.tasks]
    assert not any(t.warmups for t in lost.assignment.tasks), "nothing pre-warmed for a likely bounce"
    world.now = 30
    world.revive(1)
    world.replan()
    assert EventKind.MEMBER_RETURNED in kinds(world)
    assert world.assignment.tasks == before.tasks
    assert world.assignment.reservations == ()


def test_member_that_never_returns_loses_its_tasks_at_the_deadline() -> None:
    world = settled(12, 3, scheduled_rebalance_max_delay=300.0, lost_task_recovery="delay")
    world.kill(1)
    world.replan()
    world.now = 150
    prewarmed = world.replan()
    assert EventKind.WARMUP_STARTED in kinds(world) and prewarmed.wake_at == 300.0
    world.now = 299.9
    assert world.replan().changed is False
    world.now = 300
    world.replan()
    assert EventKind.RESERVATION_EXPIRED in kinds(world)
    assert 1 not in {t.active for t in world.assignment.tasks}


def test_a_member_visibly_restarting_is_not_prewarmed_for() -> None:
    """A lost member whose pod is starting again is waited for to the deadline with nothing warming
    elsewhere; once it stops looking like it will return (a crash loop), its tasks are pre-warmed."""
    world = settled(12, 3, scheduled_rebalance_max_delay=300.0, lost_task_recovery="delay")
    world.kill(1)
    world.members[1].returning = True
    world.replan()
    world.now = 200
    assert world.replan().changed is False, "past the pre-warm point, but the member is on its way back"
    assert not any(t.warmups for t in world.assignment.tasks)
    world.members[1].returning = False
    world.replan()
    assert EventKind.WARMUP_STARTED in kinds(world)


def test_a_member_still_restarting_at_the_deadline_loses_its_tasks() -> None:
    """Returning holds no longer than the delay: at the deadline the tasks move, cold."""
    world = settled(12, 3, scheduled_rebalance_max_delay=300.0, lost_task_recovery="delay")
    world.kill(1)
    world.members[1].returning = True
    world.replan()
    world.now = 300
    world.replan()
    assert EventKind.RESERVATION_EXPIRED in kinds(world)
    assert 1 not in {t.active for t in world.assignment.tasks}


def test_caught_up_standby_takes_over_a_lost_task_at_once() -> None:
    world = settled(6, 3, standby_replicas=1, failover_to_standby=True)
    task = next(t for t, a in enumerate(world.assignment.tasks) if a.active == 0)
    standby = world.assignment.tasks[task].standbys[0]
    epoch = world.assignment.tasks[task].epoch
    world.kill(0)
    world.replan()
    assert world.assignment.tasks[task].active == standby
    assert world.assignment.tasks[task].epoch == epoch + 1
    assert EventKind.FAILED_OVER in kinds(world)


def test_without_failover_a_lost_task_waits_for_its_member() -> None:
    world = settled(6, 3, standby_replicas=1, failover_to_standby=False)
    world.kill(0)
    world.replan()
    assert {t.active for t in world.assignment.tasks if t.active == 0} == {0}


def test_warmup_replaces_the_owner_only_at_handoff_lag() -> None:
    world = settled(4, 1, acceptable_recovery_lag=1000, handoff_lag=0)
    world.scale(2)
    world.replan()
    warm = [t for t, a in enumerate(world.assignment.tasks) if a.warmups == (1,)]
    assert len(warm) == 2 and all(a.active == 0 for a in world.assignment.tasks)
    world.members[1].lags = {t: 500 for t in warm}  # caught up, but not yet at the handoff lag
    world.apply(1)
    assert not world.replan().changed
    world.members[1].lags = {warm[0]: 0, warm[1]: 500}
    world.replan()
    assert world.assignment.tasks[warm[0]].revoking_since == world.assignment.generation
    assert world.assignment.tasks[warm[1]].revoking_since is None
    assert EventKind.WARMUP_PROMOTED in kinds(world)


def test_probing_recheck_promotes_a_caught_up_warmup_that_never_reaches_handoff_lag() -> None:
    world = settled(4, 1, acceptable_recovery_lag=1000, probing_rebalance_interval=600.0)
    world.scale(2)
    first = world.replan()
    assert first.wake_at == 600.0
    world.members[1].lags = dict.fromkeys(range(4), 800)
    world.apply(1)
    world.now = 600
    world.replan()
    assert sum(1 for a in world.assignment.tasks if a.revoking_since is not None) == 2


def test_revoked_task_goes_to_successor_only_after_acknowledgement() -> None:
    world = settled(2, 1, handoff_lag=0)
    world.scale(2)
    world.replan()
    task = next(t for t, a in enumerate(world.assignment.tasks) if a.warmups)
    world.members[1].lags = {task: 0}
    world.replan()
    assert world.assignment.tasks[task].active == 0
    assert not world.replan().changed, "reassigned before the owner acknowledged"
    world.apply(0)
    world.replan()
    assert world.assignment.tasks[task].active == 1


def test_nobody_caught_up_the_most_caught_up_member_takes_the_task() -> None:
    app = AppConfig(1, 2, RebalanceConfig(acceptable_recovery_lag=10))
    members = [MemberView(0, lags={0: 5000}), MemberView(1, lags={0: 90})]
    result = plan(app, members, Assignment(), now=0)
    assert result.assignment.tasks[0].active == 1


def test_draining_member_keeps_processing_until_its_successor_is_warm() -> None:
    world = settled(4, 2, drain_on_scale_in=True)
    world.scale(1)
    result = world.replan()
    assert sorted(a.active for a in world.assignment.tasks) == [0, 0, 1, 1]
    assert result.removable == ()
    world.converge(20)
    assert {a.active for a in world.assignment.tasks} == {0}
    assert 1 not in world.members


def test_cooperative_revokes_at_once_without_warmups() -> None:
    world = settled(4, 1, protocol="cooperative")
    world.scale(2)
    world.replan()
    revoking = [a for a in world.assignment.tasks if a.revoking_since is not None]
    assert len(revoking) == 2 and not any(a.warmups for a in world.assignment.tasks)


def test_eager_revokes_everything_on_any_membership_change() -> None:
    world = settled(6, 2, protocol="eager")
    world.scale(3)
    world.replan()
    assert all(a.revoking_since is not None for a in world.assignment.tasks)
    world.converge(10)
    assert sorted(a.active for a in world.assignment.tasks) == [0, 0, 1, 1, 2, 2]


def test_capacity_weights_active_counts() -> None:
    app = AppConfig(9, 2)
    result = plan(app, [MemberView(0, capacity=2.0), MemberView(1, capacity=1.0)], Assignment(), now=0)
    counts = [sum(1 for a in result.assignment.tasks if a.active == m) for m in (0, 1)]
    assert counts == [6, 3]


def test_standbys_prefer_other_zones() -> None:
    app = AppConfig(6, 4, RebalanceConfig(standby_replicas=1))
    members = [MemberView(i, zone="ab"[i // 2]) for i in range(4)]
    result = plan(app, members, Assignment(), now=0)
    zone = {m.id: m.zone for m in members}
    for a in result.assignment.tasks:
        assert a.active is not None
        assert zone[a.standbys[0]] != zone[a.active]


def test_partitions_are_immutable() -> None:
    world = settled(4, 2)
    try:
        plan(AppConfig(5, 2), world.views(), world.assignment, now=0)
    except ValueError as error:
        assert "immutable" in str(error)
    else:
        raise AssertionError("a partition change was accepted")


def test_assignment_survives_a_round_trip_through_its_persisted_form() -> None:
    world = settled(6, 3, standby_replicas=1)
    world.kill(2)
    world.replan()
    assert Assignment.from_dict(world.assignment.to_dict()) == world.assignment


def test_persisted_form_tolerates_dropped_nulls() -> None:
    """The API server prunes null fields from stored objects; reading must not depend on them."""
    world = settled(4, 2)
    world.kill(1)
    world.replan()
    data = world.assignment.to_dict()
    pruned = {k: v for k, v in data.items() if v is not None}
    pruned["tasks"] = [{k: v for k, v in t.items() if v is not None} for t in data["tasks"]]
    assert Assignment.from_dict(pruned) == world.assignment


def _warming(world: World) -> dict[int, int]:
    counts: dict[int, int] = {}
    for t in world.assignment.tasks:
        for member in t.warmups:
            counts[member] = counts.get(member, 0) + 1
    return counts


def test_each_new_member_warms_its_own_budget_at_once() -> None:
    """`maxWarmupReplicas` is per destination: a scale-out to two new members warms on both."""
    world = settled(16, 2, max_warmup_replicas=2)
    world.scale(4)
    world.replan()
    assert _warming(world) == {2: 2, 3: 2}


def test_the_total_cap_bounds_warmups_across_members() -> None:
    world = settled(16, 2, max_warmup_replicas=2, max_warmup_replicas_total=3)
    world.scale(4)
    world.replan()
    assert sum(_warming(world).values()) == 3
    assert all(n <= 2 for n in _warming(world).values())


def test_lowering_the_budget_drops_running_warmups_beyond_it() -> None:
    world = settled(16, 2, max_warmup_replicas=3)
    world.scale(3)
    world.replan()
    assert _warming(world) == {2: 3}
    world.app = AppConfig(16, 3, RebalanceConfig(max_warmup_replicas=1))
    world.replan()
    assert _warming(world) == {2: 1}
    assert EventKind.WARMUP_CANCELLED in kinds(world)


def test_a_failed_over_member_is_held_for_and_keeps_its_copies() -> None:
    """Every task of the lost member fails over to its standby at once, yet the member is reserved:
    nothing moves among the survivors and no copy is replaced while it is likely to come back, and its
    old tasks keep it as their standby, so it takes them back by promotion in place."""
    world = settled(12, 4, standby_replicas=1, scheduled_rebalance_max_delay=300.0)
    before = world.assignment
    lost = {t for t, a in enumerate(before.tasks) if a.active == 1}
    world.kill(1)
    result = world.replan()
    after = world.assignment
    assert after.reserved_for(1) is not None and result.wake_at == 150.0
    assert all(after.tasks[t].active != 1 and after.tasks[t].standbys == (1,) for t in lost)
    assert not any(t.warmups or t.revoking_since is not None for t in after.tasks)
    kept = [t for t in range(12) if t not in lost]
    assert all(after.tasks[t].standbys == before.tasks[t].standbys for t in kept)
    world.now = 30
    world.revive(1)
    world.converge(20)
    events = [e for p in world.history for e in p.events]
    assert not any(e.kind == EventKind.WARMUP_CANCELLED for e in events)
    assert sorted(t for t, a in enumerate(world.assignment.tasks) if a.active == 1) == sorted(lost)


def test_a_lost_members_copies_are_replaced_from_half_the_delay() -> None:
    world = settled(12, 4, standby_replicas=1, scheduled_rebalance_max_delay=300.0)
    world.kill(1)
    world.replan()
    world.now = 149
    world.replan()
    assert world.assignment.reserved_for(1) is not None
    world.now = 150
    world.replan()
    assert world.assignment.reserved_for(1) is None, "nothing held: the reservation ends at half the delay"
    world.converge(20)
    live = {0, 2, 3}
    assert all(any(m in live for m in t.standbys) and t.active in live for t in world.assignment.tasks)
