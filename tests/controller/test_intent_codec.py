"""The compact intent (format 2) gives back exactly the assignment it was made from, reads format 1,
refuses damage instead of guessing, and stays small at 100,000 tasks."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamapp.controller import intent
from streamapp.controller.intentrebuild import read_intent
from streamapp.rebalance import AppConfig, Assignment, MemberView, plan
from streamapp.rebalance.config import RebalanceConfig
from streamapp.rebalance.model import Reservation, TaskAssignment

members = st.integers(0, 1_200)
times = st.floats(0, 4e9, allow_nan=False, allow_infinity=False)
tasks = st.builds(
    TaskAssignment,
    active=st.none() | members,
    epoch=st.integers(0, 10**6),
    revoking_since=st.none() | st.integers(0, 10**6),
    standbys=st.lists(members, max_size=3).map(tuple),
    warmups=st.lists(members, max_size=2).map(tuple),
    revoking_at=st.none() | times,
)
assignments = st.builds(
    Assignment,
    generation=st.integers(0, 10**6),
    tasks=st.lists(tasks, max_size=60).map(tuple),
    reservations=st.lists(st.builds(Reservation, members, times), max_size=3).map(tuple),
    membership=st.sets(members, max_size=40).map(lambda ids: tuple(sorted(ids))),
    next_probe_at=st.none() | times,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(assignments)
def test_every_assignment_survives_the_round_trip_through_json(assignment: Assignment) -> None:
    stored = json.loads(json.dumps(intent.encode(assignment)))
    assert intent.decode(stored) == assignment


@settings(max_examples=100, deadline=None)
@given(assignments)
def test_the_first_format_is_still_read(assignment: Assignment) -> None:
    assert intent.decode(json.loads(json.dumps(assignment.to_dict()))) == assignment


def encoded(**fields: Any) -> dict[str, Any]:
    assignment = Assignment(
        generation=3,
        tasks=(TaskAssignment(0, 2, standbys=(1,)), TaskAssignment(1, 1, 3, (), (0,), 7.5)),
        membership=(0, 1),
    )
    return {**intent.encode(assignment), **fields}


def pack(text: str) -> str:
    return base64.b64encode(zlib.compress(text.encode())).decode()


@pytest.mark.parametrize(
    "damage",
    [
        {"format": 3},
        {"partitions": 3},
        {"partitions": -1},
        {"generation": "7"},
        {"columns": "not base64!"},
        {"columns": encoded()["columns"][:-8] + "AAAAAAA="},
        {"columns": pack("0,1\n2,1\n1,\n")},
        {"columns": pack("0,1\n2,x\n1,\n,0")},
        {"columns": pack("0,1\n2,1_0\n1,\n,0")},
        {"columns": pack("0,1,1\n2,1\n1,\n,0")},
        {"revoking": [[2, 3, 7.5]]},
        {"revoking": [[1, 3, 7.5], [1, 3, 7.5]]},
        {"membership": "0-x"},
        {"tasks": "garbage"},
    ],
)
def test_damage_is_refused_and_the_intent_rebuilt_from_the_members(damage: dict[str, Any]) -> None:
    assert intent.decode(encoded()) == intent.decode(json.loads(json.dumps(encoded())))
    with pytest.raises(ValueError, match="unreadable"):
        read_intent(encoded(**damage), 2)


def test_an_intent_for_another_partition_count_is_refused() -> None:
    with pytest.raises(ValueError, match="2 tasks for 4 partitions"):
        read_intent(encoded(), 4)


def test_membership_is_kept_as_ranges() -> None:
    assert intent.ranges((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"
    assert intent.parse_ranges("0-2,5,7-8") == (0, 1, 2, 5, 7, 8)
    assert intent.parse_ranges("") == ()


def test_a_planned_app_takes_well_under_a_byte_per_task() -> None:
    config = AppConfig(20_000, 400, RebalanceConfig(standby_replicas=1))
    views = [MemberView(m, acked_generation=1) for m in range(400)]
    assignment = plan(config, views, Assignment(), 0.0).assignment
    stored = json.dumps(intent.encode(assignment))
    assert len(stored) < 10_000 < len(json.dumps(assignment.to_dict())) // 100
    assert intent.decode(json.loads(stored)) == assignment
