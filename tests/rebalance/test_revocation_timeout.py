"""The revocation deadline: a member that never acknowledges is declared lost, never waited on forever."""

from __future__ import annotations

import pytest
from world import World

from streamapp.api.fields import ValidationError
from streamapp.api.rebalance import REBALANCE
from streamapp.rebalance import AppConfig, Assignment, EventKind, RebalanceConfig, plan


def stalled(timeout: float = 120.0) -> tuple[World, int, int]:
    """A settled 12-task app scaled 3 → 4 whose member 0 goes deaf just as it is asked to let go of a
    task; returns the world, the task and the time it was asked."""
    world = World.start(AppConfig(12, 3, RebalanceConfig(revocation_timeout=timeout)))
    world.converge(50)
    world.members[0].deaf = True
    world.scale(4)
    world.now = 10.0
    for _ in range(10):
        world.settle_round()
        pending = [t for t, a in enumerate(world.assignment.tasks) if a.revoking_since and a.active == 0]
        if pending:
            return world, pending[0], 10
    raise AssertionError("member 0 was never asked to let go of a task")


def test_the_next_wake_up_is_the_revocation_deadline() -> None:
    world, task, asked = stalled(timeout=120.0)
    assert world.assignment.tasks[task].revoking_at == asked
    world.now = 50.0
    result = world.replan()
    assert result.wake_at == asked + 120.0
    assert result.timed_out == () and world.assignment.tasks[task].active == 0


def test_a_member_that_never_acknowledges_is_declared_lost_then_its_task_moves() -> None:
    world, task, asked = stalled(timeout=120.0)
    successor = world.assignment.tasks[task].warmups[0]
    world.now = asked + 119.0
    assert world.replan().timed_out == ()
    world.now = asked + 120.0
    result = world.replan()
    assert result.timed_out == (0,)
    timed_out = [e for e in result.events if e.kind is EventKind.REVOCATION_TIMED_OUT]
    assert [(e.member, task in e.tasks, e.warning) for e in timed_out] == [(0, True, True)]
    # The task stays with member 0 while its pod exists: only the deleted pod releases it.
    assert world.assignment.tasks[task].active == 0
    assert world.assignment.tasks[task].revoking_at == world.now
    assert not world.members[0].alive  # the world, like the operator, deleted the pod
    epoch = world.assignment.tasks[task].epoch
    world.replan()
    moved = world.assignment.tasks[task]
    assert moved.active == successor and moved.epoch > epoch


def test_a_timed_out_members_task_waits_until_its_pod_is_gone_not_merely_deleted() -> None:
    """The pod of a member that let a revocation time out is deleted, and its process may run on until
    the grace period ends: while the pod is still there (terminating), the task stays revoking on it;
    once the pod is gone, it moves under a new epoch."""
    world, task, asked = stalled(timeout=120.0)
    world.now = asked + 120.0
    world.replan()
    world.members[0].stopping = True  # deleted, still terminating
    epoch = world.assignment.tasks[task].epoch
    for _ in range(3):
        world.now += 10
        world.replan()
        assert world.assignment.tasks[task].active == 0 and world.assignment.tasks[task].revoking_since
    world.members[0].stopping = False  # the pod is gone
    world.replan()
    assert world.assignment.tasks[task].active not in (None, 0)
    assert world.assignment.tasks[task].epoch > epoch


def test_the_replacement_pod_gets_a_whole_timeout() -> None:
    world, task, asked = stalled(timeout=120.0)
    world.now = asked + 120.0
    world.replan()
    world.revive(0)  # the new pod is ready before the operator saw the old one gone
    world.now += 60.0
    result = world.replan()
    assert result.timed_out == () and result.wake_at == asked + 240.0
    world.apply(0)  # the healthy pod acknowledges: the revocation ends the ordinary way
    world.replan()
    assert world.assignment.tasks[task].active != 0


def test_revocation_times_survive_persistence_and_old_intents_count_from_now() -> None:
    world, task, _ = stalled()
    restored = Assignment.from_dict(world.assignment.to_dict())
    assert restored == world.assignment
    legacy = Assignment.from_dict(
        {
            **world.assignment.to_dict(),
            "tasks": [
                {k: v for k, v in t.items() if k != "revokingAt"} for t in world.assignment.to_dict()["tasks"]
            ],
        }
    )
    result = plan(world.app, world.views(), legacy, 1000.0)
    assert result.timed_out == () and world.assignment.tasks[task].active == 0
    assert result.assignment.tasks[task].revoking_at == 1000.0


def test_revocation_timeout_is_a_positive_duration() -> None:
    assert RebalanceConfig().revocation_timeout == 300.0
    assert REBALANCE.decode({"revocationTimeout": "90s"}, "rebalance").revocation_timeout == 90.0
    assert RebalanceConfig().to_spec()["revocationTimeout"] == "5m"
    with pytest.raises(ValidationError, match="revocationTimeout"):
        REBALANCE.decode({"revocationTimeout": "0s"}, "rebalance")
