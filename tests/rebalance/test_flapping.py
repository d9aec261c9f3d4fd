"""Flapping members are damped (rebalance/flapping.py): lost twice within `flapWindow`, a member is not
trusted to return, hands its tasks off while up, and takes tasks again after staying up a window."""

from __future__ import annotations

from dataclasses import replace

from world import World

from streamapp.controller.intent import decode, encode
from streamapp.rebalance import AppConfig, Assignment, EventKind, RebalanceConfig
from streamapp.rebalance.rollout import at_rest

ROWS = 100_000


def settled(**rebalance: object) -> World:
    """12 tasks on 3 members; a restore elsewhere takes 100 s, a member is back in 40 s: waiting for a
    bouncing member wins, as long as it is trusted."""
    world = World.start(AppConfig(12, 3, RebalanceConfig(**rebalance)))  # type: ignore[arg-type]
    world.converge(50)
    for task, t in enumerate(world.assignment.tasks):
        assert t.active is not None
        world.members[t.active].restore_rows[task] = ROWS
    for member in world.members.values():
        member.restore_rate = 1_000.0
    return world


def owned(world: World, member: int) -> list[int]:
    return [task for task, t in enumerate(world.assignment.tasks) if t.active == member]


def bounce(world: World, member: int, at: float) -> list[int]:
    """Member `member` dies at `at`, visibly on its way back (expected in 40 s); one plan."""
    world.now = at
    held = owned(world, member)
    world.kill(member)
    world.members[member].returning = True
    world.members[member].return_seconds = 40.0
    world.replan()
    return held


def back(world: World, member: int, at: float) -> None:
    """The member is ready again at `at` and applies its target; one plan."""
    world.now = at
    world.revive(member)
    world.replan()
    world.apply(member)


def damped_and_drained(**rebalance: object) -> World:
    """Member 1 bounced at 0 and 180 s, back 40 s later each time, and handed everything off."""
    world = settled(**rebalance)
    bounce(world, 1, 0.0)
    back(world, 1, 40.0)
    bounce(world, 1, 180.0)
    back(world, 1, 220.0)
    for _ in range(6):
        world.settle_round()
    assert owned(world, 1) == [] and not world.assignment.in_flight()
    return world


def kinds(world: World) -> set[EventKind]:
    return {e.kind for e in world.history[-1].events}


def choice(world: World) -> str:
    return world.history[-1].lost[0].choice


def test_a_first_bounce_waits_for_the_member() -> None:
    world = settled()
    held = bounce(world, 1, 0.0)
    assert held and all(world.assignment.tasks[t].active == 1 for t in held) and choice(world) == "Wait"
    assert world.assignment.flaps[0].losses == (0.0,) and not world.assignment.flaps[0].damped


def test_a_second_loss_within_the_window_restores_elsewhere_and_drains_the_member() -> None:
    """Lost again 3 minutes after a bounce: its tasks are restored elsewhere (a Warning Event says
    why) — at once the head of each survivor's restore queue, the others behind them; back first, it
    processes them again, gets nothing new, and they move off it by warm handoffs — revoked only once
    their successors caught up."""
    world = settled()
    bounce(world, 1, 0.0)
    back(world, 1, 40.0)
    held = bounce(world, 1, 180.0)
    assert EventKind.MEMBER_FLAPPING in kinds(world)
    assert next(e for e in world.history[-1].events if e.kind == EventKind.MEMBER_FLAPPING).warning
    assert sorted(m for t in held for m in world.assignment.tasks[t].warmups) == [0, 2]
    assert choice(world) == "Restore" and set(world.history[-1].lost[0].restoring) == set(held)
    assert "flapping" in world.history[-1].lost[0].reason
    back(world, 1, 220.0)
    assert all(world.assignment.tasks[t].active == 1 for t in held), "back first: it processes them"
    assert all(world.assignment.tasks[t].revoking_since is None for t in held), "nothing cold"
    for member in (0, 2):
        world.apply(member)
        world.catch_up(member)
    world.now = 230.0
    world.replan()
    assert all(world.assignment.tasks[t].revoking_since is not None for t in held)
    for _ in range(5):
        world.settle_round()
    assert owned(world, 1) == [] and not world.double_owned()


def test_a_damped_member_takes_tasks_again_after_staying_up_a_window() -> None:
    world = damped_and_drained(flap_window=600.0)
    assert world.history[-1].wake_at == 820.0, "woken when the member has been up a window"
    world.now = 819.0
    world.settle_round()
    assert owned(world, 1) == []
    world.now = 820.0
    world.replan()
    assert EventKind.MEMBER_STEADY in kinds(world) and world.assignment.flaps == ()
    world.converge(20)
    assert len(owned(world, 1)) == 4


def test_a_loss_outside_the_window_does_not_count() -> None:
    """Lost once, back, lost again 11 minutes later with a 10-minute window: a bounce like any other."""
    world = settled(flap_window=600.0)
    bounce(world, 1, 0.0)
    back(world, 1, 40.0)
    bounce(world, 1, 660.0)
    assert EventKind.MEMBER_FLAPPING not in kinds(world) and choice(world) == "Wait"
    assert [f.losses for f in world.assignment.flaps] == [(660.0,)]


def test_a_rolling_restart_in_place_is_no_loss() -> None:
    """A bounce, then the operator restarts the member's pod in place (`replaced`): not a flap."""
    world = settled()
    bounce(world, 1, 0.0)
    back(world, 1, 40.0)
    world.now = 180.0
    world.kill(1)
    world.members[1].returning = True
    world.members[1].return_seconds = 40.0
    world.members[1].replaced = True
    world.replan()
    assert EventKind.MEMBER_FLAPPING not in kinds(world)
    assert [f.losses for f in world.assignment.flaps] == [(0.0,)]


def test_the_last_live_member_is_never_damped() -> None:
    """Two members, one lost for good, the other flapping: the flapping one keeps its tasks."""
    world = World.start(AppConfig(4, 2, RebalanceConfig()))
    world.converge(20)
    world.kill(0)
    world.now = 10.0
    world.converge(20)
    world.now = 20.0
    bounce(world, 1, 20.0)
    back(world, 1, 60.0)
    bounce(world, 1, 100.0)
    back(world, 1, 140.0)
    world.converge(20)
    assert len(owned(world, 1)) == 4


def test_damping_is_off_with_a_zero_window_and_for_the_baselines() -> None:
    for config in (RebalanceConfig(flap_window=0.0), RebalanceConfig(protocol="cooperative")):
        world = World.start(AppConfig(12, 3, config))
        world.converge(50)
        bounce(world, 1, 0.0)
        back(world, 1, 40.0)
        bounce(world, 1, 180.0)
        assert EventKind.MEMBER_FLAPPING not in kinds(world) and world.assignment.flaps == ()


def test_flaps_survive_the_persisted_intent() -> None:
    """A restarted operator keeps the count: the intent holds it, in both of its forms."""
    world = settled()
    bounce(world, 1, 0.0)
    back(world, 1, 40.0)
    bounce(world, 1, 180.0)
    flaps = world.assignment.flaps
    assert flaps and flaps[0].damped
    assert Assignment.from_dict(world.assignment.to_dict()).flaps == flaps
    assert decode(encode(world.assignment)).flaps == flaps


def test_the_operators_own_restart_is_not_insured() -> None:
    """An in-place restart by a rolling update (`replaced`) is waited for without insurance copies:
    planned and measured, it would only throw them away; a crash of the same member is insured."""
    world = settled()
    world.kill(1)
    world.members[1].returning = True
    world.members[1].return_seconds = 40.0
    world.members[1].replaced = True
    world.replan()
    assert world.assignment.reservations[0].planned
    assert not any(t.warmups for t in world.assignment.tasks)
    back(world, 1, 40.0)
    bounce(world, 1, 1_000.0)
    assert not world.assignment.reservations[0].planned
    assert any(t.warmups for t in world.assignment.tasks)


def test_a_rolling_update_does_not_wait_for_a_damped_members_share() -> None:
    """The rollout takes its next member once the app is at rest; a damped member owning nothing is
    not a member short of its share (it would hold every step of a rollout for handoffTimeout)."""
    world = damped_and_drained()
    assert at_rest(world.assignment, world.views(), 3)
    assert not at_rest(replace(world.assignment, flaps=()), world.views(), 3)


def test_a_damped_member_scaled_away_is_dropped_without_a_steady_event() -> None:
    world = damped_and_drained()
    world.now = 300.0
    world.scale(1)
    for _ in range(6):
        world.settle_round()
    assert world.assignment.flaps == ()
    assert not any(e.kind == EventKind.MEMBER_STEADY for p in world.history for e in p.events)
