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
    that take them, which restore while active; the old owner keeps a standby copy in place. Each
    survivor takes two, which share its throughput: the second ends after ~2 s."""
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
    assert report.restore_seconds == 2 * ROWS / 100_000 and report.restore_rows == ROWS * len(owned)
    assert report.back_at == 40.0 and "expected back 40 s" in report.reason


def test_a_member_expected_back_before_a_restore_keeps_its_tasks_until_overdue() -> None:
    """Restores of 100 s against a member back in 40 s: nothing moves, and the tasks are warmed
    elsewhere only as insurance, one per survivor (the queue's head there); the plan wakes when the
    member becomes overdue, and from then on every one of its tasks is restored elsewhere: the
    insurance goes on, the others queue behind it."""
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
    assert sorted(m for t in owned for m in overdue.assignment.tasks[t].warmups) == [0, 2]
    report = lost_member(world, 1)
    assert report.choice == "Restore" and set(report.restoring) == set(owned)
    assert "overdue" in report.reason and "2 queued behind restores" in report.reason


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
    its tasks untouched), one per survivor at a time — either way nobody waits for the delay."""
    quick = settled()
    owned = lose(quick, 1, returning=False, expected=40.0)
    quick.replan()
    assert all(quick.assignment.tasks[t].active not in (None, 1) for t in owned)
    slow = settled(rate=1_000.0)
    owned = lose(slow, 1, returning=False, expected=40.0)
    slow.replan()
    assert all(slow.assignment.tasks[t].active == 1 for t in owned)
    assert sorted(m for t in owned for m in slow.assignment.tasks[t].warmups) == [0, 2]
    report = lost_member(slow, 1)
    assert report.choice == "Restore" and len(report.restoring) == len(owned)
    assert "not visibly coming back" in report.reason and report.restore_seconds == 200.0


def test_restores_of_down_tasks_are_not_paced_by_the_warmup_budget() -> None:
    """12 tasks on 2 members, one lost: its 6 tasks all go to the other. The warmup budget is 1, but
    nobody processes these tasks: restores of ~0.5 s each, all ending within the overlap of the
    survivor's queue (3 s in all), start at once and are taken over, before the member could be back
    (80 s); none waits for the member."""
    world = settled(12, 2, rate=2 * ROWS, max_warmup_replicas=1)
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


def own_tasks(world: World, member: int) -> list[int]:
    return [task for task, t in enumerate(world.assignment.tasks) if t.active == member]


def test_a_destination_restores_a_silent_members_tasks_one_after_another_shortest_first() -> None:
    """One survivor restores the three tasks of a silent member: 10, 20 and 30 s at its throughput,
    which they would share. The shortest is taken over at once; the others wait their turn, held,
    and the report says the last ends after 60 s. The next starts once the restore ahead of it is
    within the overlap of its end (its reported lag), and is taken over too (it ends before the
    member could be back)."""
    world = settled(6, 2, rate=10_000.0)
    owned = own_tasks(world, 1)
    for task, rows in zip(owned, (300_000, 100_000, 200_000), strict=True):
        world.members[1].restore_rows[task] = rows
    lose(world, 1, returning=False, expected=40.0)
    world.replan()
    first, second, third = owned[1], owned[2], owned[0]
    assert world.assignment.tasks[first].active == 0
    assert all(
        world.assignment.tasks[t].active == 1 and not world.assignment.tasks[t].warmups
        for t in (second, third)
    )
    report = lost_member(world, 1)
    assert report.restore_seconds == 60.0 and "2 queued behind restores" in report.reason
    world.apply(0)
    world.members[0].lags[first] = 60_000  # 6 s of restore left: not yet within the overlap
    world.now = 4
    world.replan()
    assert world.assignment.tasks[second].active == 1
    world.members[0].lags[first] = 40_000  # 4 s left
    world.now = 6
    world.replan()
    assert world.assignment.tasks[second].active == 0 and world.assignment.tasks[third].active == 1


def test_a_returning_members_task_waits_when_its_place_in_the_queue_ends_after_its_return() -> None:
    """The bounce measured on real executors: a member holding two tasks is lost and expected back in
    45 s; its one survivor restores a task in 30 s, two side by side in 60 s. The first is restored
    elsewhere (taken over: it ends before the member is back); the second, whose place in the queue
    ends after the return, waits for the member. Its insurance starts only once the first restore is
    about done, so as not to slow it."""
    world = settled(4, 2, rate=ROWS / 30.0)
    owned = lose(world, 1, returning=True, expected=45.0)
    world.replan()
    moved = [t for t in owned if world.assignment.tasks[t].active == 0]
    waiting = [t for t in owned if world.assignment.tasks[t].active == 1]
    assert len(moved) == 1 and len(waiting) == 1
    assert not world.assignment.tasks[waiting[0]].warmups
    report = lost_member(world, 1)
    assert report.reason.startswith("restoring 1 of 2 tasks elsewhere") and report.restore_seconds == 60.0
    world.apply(0)
    world.members[0].lags[moved[0]] = int(ROWS / 30.0 * 4)  # 4 s left
    world.now = 26
    world.replan()
    assert world.assignment.tasks[waiting[0]].warmups == (0,)
    assert world.assignment.tasks[waiting[0]].active == 1


def test_what_a_destination_restores_already_comes_first() -> None:
    """Member 0 is restoring a task it took over earlier (300 s of rows left); member 2 restores
    nothing. A member expected back in 45 s loses four tasks of 30 s each: they would all end sooner
    on member 2, where the first is restored and the others, whose places end after the member's
    return, wait for it; nothing goes behind member 0's restore."""
    world = settled(12, 3, rate=ROWS / 30.0)
    busy_task = own_tasks(world, 0)[0]
    world.members[0].lags[busy_task] = 10 * ROWS
    owned = lose(world, 1, returning=True, expected=45.0)
    world.replan()
    moved = {t: world.assignment.tasks[t].active for t in owned if world.assignment.tasks[t].active != 1}
    assert list(moved.values()) == [2]


def test_optional_warmups_give_way_on_a_destination_restoring_down_tasks() -> None:
    """A scale-in drains member 3 by warm handoffs to the others; then member 1 is lost for good. Its
    tasks are down, the drained ones are not: every survivor that takes one of member 1's tasks keeps
    no warmup of member 3's, which would share its throughput with the restore."""
    world = World.start(AppConfig(12, 4, RebalanceConfig(max_warmup_replicas=2)))
    world.converge(50)
    for task, t in enumerate(world.assignment.tasks):
        assert t.active is not None
        world.members[t.active].restore_rows[task] = ROWS
    for member in world.members.values():
        member.restore_rate = ROWS / 30.0
    world.scale(3)
    world.replan()
    draining = own_tasks(world, 3)
    assert any(world.assignment.tasks[t].warmups for t in draining)
    lost = lose(world, 1, returning=False, expected=40.0)
    world.replan()
    restoring = {m for t in lost for m in world.assignment.tasks[t].warmups} | {
        world.assignment.tasks[t].active for t in lost if world.assignment.tasks[t].active != 1
    }
    assert restoring
    assert not {m for t in draining for m in world.assignment.tasks[t].warmups} & restoring


def test_a_survivor_keeping_local_state_of_a_lost_task_takes_it_over_by_its_delta() -> None:
    """The large cluster run's permanent loss: a survivor kept the local state of a task it gave up
    earlier (no copy of it running), 639 records behind, while a restore from nothing takes 100 s.
    The task goes to that survivor at once, which replays the delta while active — not warmed up and
    promoted at a restore's estimate, nor sent where a full restore would run."""
    world = settled(4, 2, rate=1_000.0)
    owned = lose(world, 1, returning=False, expected=70.0)
    task = owned[0]
    world.members[0].lags[task] = 639
    world.replan()
    t = world.assignment.tasks[task]
    assert t.active == 0 and not t.warmups
    assert EventKind.RESTORED_ELSEWHERE in kinds(world)


def test_a_restore_rate_no_live_member_measured_yet_is_the_one_last_reported() -> None:
    """Mid-rollout the one survivor has just restarted and measured nothing yet: the lost member's
    last measured rate stands in, so a 100-s restore against a member back in 40 s waits for it
    instead of being restored elsewhere unmeasured."""
    world = settled(2, 2, rate=1_000.0)
    world.members[0].restore_rate = None
    owned = lose(world, 1, returning=True, expected=40.0)
    world.replan()
    assert all(world.assignment.tasks[t].active == 1 for t in owned)
    report = lost_member(world, 1)
    assert report.choice == "Wait" and report.restore_seconds == 100.0
