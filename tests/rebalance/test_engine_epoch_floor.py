"""The epoch floor ("epochs never go below one the store has seen": docs/design.md, "Architecture") as
properties and units.

Members report, per task, the highest epoch they have seen in the shared store. Whatever the persisted
assignment says — it may have been lost and restarted at 1 — the engine hands out no epoch at or below
such a report, and an owner running under a lower epoch than the store's is given a new one in place.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants import Setup, events, run, setups
from world import World

from streamapp.rebalance import AppConfig, Assignment, EventKind, MemberView, plan


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), events, st.lists(st.tuples(st.integers(0, 7), st.integers(0, 23), st.integers(0, 30))))
def test_no_epoch_is_handed_out_at_or_below_a_reported_store_epoch(
    setup: Setup, history: list[tuple[str, int, int]], reports: list[tuple[int, int, int]]
) -> None:
    world = World.start(setup.app, setup.zones, setup.capacities)
    for kind, member, value in history:
        run(world, kind, member, value)
    stored: dict[int, dict[int, int]] = {}
    for member, task, epoch in reports:
        if member in world.members and task < world.app.partitions:
            stored.setdefault(member, {})[task] = epoch
    views = [replace(v, store_epochs=stored.get(v.id, {})) for v in world.views()]
    floor = [max((s.get(t, 0) for s in stored.values()), default=0) for t in range(world.app.partitions)]
    before = world.assignment.tasks or Assignment.empty(world.app.partitions).tasks
    result = plan(world.app, views, world.assignment, world.now)
    for task, (old, new) in enumerate(zip(before, result.assignment.tasks, strict=True)):
        if new.active is not None and (new.active, new.epoch) != (old.active, old.epoch):
            assert new.epoch > floor[task], f"task {task}: epoch {new.epoch}, store {floor[task]}"
        if new.active is not None and new.revoking_since is None:
            assert new.epoch >= floor[task], f"task {task}: owner {new.active} left fenced"
    refenced = {t for e in result.events if e.kind is EventKind.TASK_FENCED for t in e.tasks}
    assert refenced <= set(result.fenced)


def test_lost_intent_resumes_above_the_store_on_the_same_owner() -> None:
    """An app re-created on its store starts at epoch 1; once members report the store's epochs the
    owners keep their tasks under new epochs above them, and the plan says which were fenced."""
    app = AppConfig(4, 2)
    first = plan(app, [MemberView(0), MemberView(1)], Assignment(), 0.0)
    assert all(t.epoch == 1 for t in first.assignment.tasks)
    reported = [
        MemberView(0, acked_generation=1, store_epochs={0: 7, 2: 1}, fenced=frozenset({0})),
        MemberView(1, acked_generation=1, store_epochs={1: 1, 3: 4}),
    ]
    fenced = plan(app, reported, first.assignment, 1.0)
    owners = [t.active for t in first.assignment.tasks]
    assert [t.active for t in fenced.assignment.tasks] == owners
    assert [t.epoch for t in fenced.assignment.tasks] == [8, 1, 1, 5]
    assert fenced.fenced == (0, 3) and fenced.changed
    assert {(e.kind, e.member, e.tasks) for e in fenced.events} == {
        (EventKind.TASK_FENCED, owners[0], (0,)),
        (EventKind.TASK_FENCED, owners[3], (3,)),
    }
    # Until the owner applies its new epoch it still reports the task fenced: not yet resolved.
    waiting = plan(app, reported, fenced.assignment, 2.0)
    assert waiting.fenced == (0,) and not waiting.changed
    resumed = [replace(reported[0], fenced=frozenset()), reported[1]]
    assert plan(app, resumed, fenced.assignment, 3.0).fenced == ()


def test_a_new_owner_starts_above_the_store_epoch() -> None:
    """A task that moves (here: its owner is lost, no delay) goes to the next owner above the store's
    epoch, even when the assignment's own epoch is lower."""
    app = AppConfig(1, 2)
    world = World.start(replace(app, rebalance=replace(app.rebalance, scheduled_rebalance_max_delay=0.0)))
    world.converge(10)
    owner = world.assignment.tasks[0].active
    assert owner is not None and world.assignment.tasks[0].epoch == 1
    world.kill(owner)
    world.members[1 - owner].store_epochs[0] = 9
    world.replan()
    assert world.assignment.tasks[0].active == 1 - owner and world.assignment.tasks[0].epoch == 10
