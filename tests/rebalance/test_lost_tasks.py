"""`lostTaskRecovery: auto`: a lost member's tasks wait for it or are restored elsewhere, whichever is
expected to be quicker (rebalance/recovery.py), one behaviour each."""

from __future__ import annotations

from world import World

from streamapp.rebalance import AppConfig, EventKind, LostMember, RebalanceConfig
from streamapp.rebalance.recovery import LATE_FACTOR

ROWS = 100_000  # rows of each task's state


def settled(
    partitions: int = 12, replicas: int = 3, rate: float | None = 100_000.0, **rebalance: object
) -> World:
    """A balanced app whose owners report `ROWS` rows per task and restore at `rate` rows/s."""
    world = World.start(AppConfig(partitions, replicas, RebalanceConfig(**rebalance)))  # type: ignore[arg-type]
    world.converge(50)
    for task, t in enumerate(world.assignment.tasks):
        assert t.active is not None
        world.members[t.active].restore_rows[task] = ROWS
    for member in world.members.values():
        member.restore_rate = rate
    return world


def lose(world: World, member: int, returning: bool, expected: float | None) -> list[int]:
    """Member `member`'s pod dies; returns the tasks it owned."""
    owned = [task for task, t in enumerate(world.assignment.tasks) if t.active == member]
    world.kill(member)
    world.members[member].returning = returning
    world.members[member].return_seconds = expected
    return owned


def kinds(world: World) -> set[EventKind]:
    return {e.kind for e in world.history[-1].events}


def lost_member(world: World, member: int) -> LostMember:
    return next(m for m in world.history[-1].lost if m.member == member)


def test_a_quick_restore_takes_over_a_returning_members_tasks_at_once() -> None:
    """Restores of ~1 s against a member expected back in 40 s: its tasks go, at once, to the members
    that take them, which restore while active; the old owner keeps a standby copy in place."""
    world = settled()
    owned = lose(world, 1, returning=True, expected=40.0)
    epochs = {task: world.assignment.tasks[task].epoch for task in owned}
    result = world.replan()
    for task in owned:
        t = result.assignment.tasks[task]
        assert t.active not in (None, 1) and t.epoch == epochs[task] + 1
        assert 1 in t.standbys, "the member comes back to a copy it can take back warm"
    assert EventKind.RESTORED_ELSEWHERE in kinds(world)
    report = lost_member(world, 1)
    assert report.choice == "Restore" and set(report.restoring) == set(owned)
    assert report.restore_seconds == ROWS / 100_000 and report.restore_rows == ROWS * len(owned)
    assert report.back_at == 40.0 and "expected back 40 s" in report.reason


def test_a_member_expected_back_before_a_restore_keeps_its_tasks_until_overdue() -> None:
    """Restores of 100 s against a member back in 40 s: nothing moves, and the tasks are warmed
    elsewhere only as insurance, within the budget (one per survivor here); the plan wakes when the
    member becomes overdue, and from then on every one of its tasks is restored elsewhere."""
    world = settled(rate=1_000.0, max_warmup_replicas=1)
    owned = lose(world, 1, returning=True, expected=40.0)
    held = world.replan()
    assert all(held.assignment.tasks[t].active == 1 for t in owned)
    insured = [m for t in owned for m in held.assignment.tasks[t].warmups]
    assert sorted(insured) == [0, 2], "one insurance warmup per survivor"
    report = lost_member(world, 1)
    assert report.choice == "Wait" and report.restore_seconds == 100.0
    assert (
        "waiting for the member" in report.reason
        and "2 warming elsewhere in case it is late" in report.reason
    )
    assert held.wake_at == LATE_FACTOR * 40.0
    world.now = 59.9
    assert not world.replan().changed
    world.now = LATE_FACTOR * 40.0
    overdue = world.replan()
    assert all(overdue.assignment.tasks[t].warmups for t in owned)
    assert "overdue" in lost_member(world, 1).reason


def test_a_member_that_returns_first_keeps_its_tasks_and_the_warmups_go() -> None:
    """Restore time unknown (no rate measured): the tasks warm elsewhere while the member is away; it
    is back before they caught up, takes its tasks back as they were, and the warmups are dropped."""
    world = settled(rate=None)
    owned = lose(world, 1, returning=True, expected=None)
    before = {task: world.assignment.tasks[task] for task in owned}
    warming = world.replan()
    assert any(warming.assignment.tasks[t].warmups for t in owned)
    assert "not measured" in lost_member(world, 1).reason
    world.now = 20
    world.revive(1)
    world.replan()
    for task in owned:
        t = world.assignment.tasks[task]
        assert (t.active, t.epoch, t.warmups) == (1, before[task].epoch, ())
    assert EventKind.WARMUP_CANCELLED in kinds(world)


def test_a_warmup_that_catches_up_first_takes_the_task() -> None:
    """Restore time unknown: the first warmup to catch up (lag at handoffLag) takes its task at once,
    before the member is back; its old owner becomes the copy it can take back by a handoff."""
    world = settled(rate=None)
    owned = lose(world, 1, returning=False, expected=None)
    world.replan()
    task = next(t for t in owned if world.assignment.tasks[t].warmups)
    successor = world.assignment.tasks[task].warmups[0]
    epoch = world.assignment.tasks[task].epoch
    world.apply(successor)
    world.members[successor].lags[task] = 0
    world.replan()
    t = world.assignment.tasks[task]
    assert (t.active, t.epoch) == (successor, epoch + 1) and 1 in t.standbys
    assert EventKind.RESTORED_ELSEWHERE in kinds(world)
    assert all(world.assignment.tasks[other].active == 1 for other in owned if other != task)


def test_a_silent_member_is_restored_for_at_once_warm_when_it_could_be_back_first() -> None:
    """A silent member (its pod not visibly coming back) may be back any time from its usual 40 s on:
    restores of 1 s are taken over at once; restores of 100 s warm (a member back first still finds
    its tasks untouched) — either way nobody waits for the delay."""
    quick = settled()
    owned = lose(quick, 1, returning=False, expected=40.0)
    quick.replan()
    assert all(quick.assignment.tasks[t].active not in (None, 1) for t in owned)
    slow = settled(rate=1_000.0)
    owned = lose(slow, 1, returning=False, expected=40.0)
    slow.replan()
    assert all(slow.assignment.tasks[t].active == 1 for t in owned)
    assert all(slow.assignment.tasks[t].warmups for t in owned)
    assert "not visibly coming back" in lost_member(slow, 1).reason


def test_restores_of_down_tasks_are_not_paced_by_the_warmup_budget() -> None:
    """12 tasks on 2 members, one lost: its 6 tasks all go to the other. The warmup budget is 2, but
    nobody processes these tasks, so all 6 restores start at once: each finishes in 30 s, before the
    member could be back (80 s), so all are taken over at once and none waits for the member."""
    world = settled(12, 2, rate=ROWS / 30.0, max_warmup_replicas=2)
    owned = lose(world, 1, returning=True, expected=80.0)
    world.replan()
    assert all(world.assignment.tasks[t].active == 0 for t in owned)
    assert lost_member(world, 1).reason.startswith("restoring elsewhere")


def test_down_tasks_of_unknown_restore_time_all_warm_at_once() -> None:
    """Restore time unknown, budget 1 per member: the lost member's 4 tasks all warm at once, two on
    each survivor (under the budget two would have waited for the first two)."""
    world = settled(12, 3, rate=None, max_warmup_replicas=1)
    owned = lose(world, 2, returning=False, expected=None)
    world.replan()
    warming = {t: world.assignment.tasks[t].warmups for t in range(12) if world.assignment.tasks[t].warmups}
    assert set(warming) == set(owned) and len(owned) == 4
    assert sorted(m for members in warming.values() for m in members) == [0, 0, 1, 1]


def test_a_restore_under_way_continues_when_the_member_is_then_expected_back_first() -> None:
    """A member first silent (restores started) then visibly returning soon: the restores go on (the
    estimate may be wrong the other way); nothing started is thrown away while the member is away."""
    world = settled(rate=1_000.0)
    owned = lose(world, 1, returning=False, expected=None)
    world.replan()
    warming = {t for t in owned if world.assignment.tasks[t].warmups}
    assert warming
    world.members[1].returning = True
    world.members[1].return_seconds = 10.0
    world.now = 2
    world.replan()
    assert {t for t in owned if world.assignment.tasks[t].warmups} == warming


def test_delay_keeps_the_fixed_delay() -> None:
    """`lostTaskRecovery: delay` holds a returning member's tasks to the deadline however quick a
    restore would be."""
    world = settled(lost_task_recovery="delay", scheduled_rebalance_max_delay=300.0)
    owned = lose(world, 1, returning=True, expected=40.0)
    result = world.replan()
    assert all(
        result.assignment.tasks[t].active == 1 and not result.assignment.tasks[t].warmups for t in owned
    )
    assert result.lost == ()
    world.now = 300
    world.replan()
    assert EventKind.RESERVATION_EXPIRED in kinds(world)


def test_the_delay_stays_the_upper_bound() -> None:
    """A member expected back late, restores slower still: at the deadline its tasks move anyway."""
    world = settled(rate=10.0, scheduled_rebalance_max_delay=120.0)
    owned = lose(world, 1, returning=True, expected=100.0)
    world.replan()
    world.now = 120
    world.replan()
    assert all(world.assignment.tasks[t].active not in (None, 1) for t in owned)
