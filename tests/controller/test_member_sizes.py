"""A member target too large for etcd even packed is refused before any member is written
(controller/reconcile.py `_write_member_specs`, api/member.py `TargetTooLarge`): written wave by
wave, the member giving its tasks up would let go of them while the one taking them over could never
be told to, and the tasks would have no owner. The reconcile shows the refusal as the app's Degraded
condition (reason TargetTooLarge) with a Warning Event, as it does a name conflict."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from test_controller_core import MODEL
from test_member_write_order import RecordingKube, members_of

from streamapp.api.member import MAX_EPOCH, TargetTooLarge
from streamapp.controller.reconcile import _write_member_specs
from streamapp.rebalance import Assignment
from streamapp.rebalance.model import TaskAssignment

TASKS = 100_000


def test_a_target_that_cannot_fit_stops_the_step_before_either_wave() -> None:
    halves = Assignment(
        generation=1, tasks=tuple(TaskAssignment(active=t % 2, epoch=1) for t in range(TASKS))
    )
    rng = random.Random(5)  # epochs a member's made-up store epochs could force: random, near MAX_EPOCH
    onto_one = Assignment(
        generation=2,
        tasks=tuple(TaskAssignment(active=0, epoch=MAX_EPOCH - rng.randrange(2**40)) for _ in range(TASKS)),
    )
    kube = RecordingKube()
    with pytest.raises(TargetTooLarge, match="member 0's target of 100000 owned"):
        _write_member_specs(
            kube, MODEL, SimpleNamespace(assignment=onto_one), members_of(halves), frozenset()
        )  # type: ignore[arg-type]
    assert kube.patched == []
