"""The fleet's single-owner check judges by the API server's order (tests/integration/fleet.py), on
hand-made applies: no cluster is contacted.

A task may be active on a new member while its old owner's executor still applies it only when the
old owner's pod had ended at a resourceVersion no later than the target that made the new one
active; the fleet decides a case once its pod watch has reached that version, never before.
"""

from __future__ import annotations

import pytest
from fleet import CheckedDataPlane, Fleet
from kubernetes import client

from streamapp.api.member import StreamAppMemberSpec


def _spec(member: int, generation: int, active: dict[int, int]) -> StreamAppMemberSpec:
    return StreamAppMemberSpec.from_dict(
        {
            "app": "a",
            "memberId": member,
            "generation": generation,
            "active": [{"task": t, "epoch": e} for t, e in active.items()],
        }
    )


def _fleet(monkeypatch: pytest.MonkeyPatch) -> Fleet:
    monkeypatch.setattr(CheckedDataPlane, "REVOKE_SECONDS", 0.0)
    fleet = Fleet(client.ApiClient(), "ns", "a")
    for member in (1, 2):
        plane = CheckedDataPlane(10_000.0, 0, {})
        plane.fleet, plane.member, plane.uid, plane.active_since = fleet, member, f"uid-{member}", {}
        fleet.planes[member] = plane
    return fleet


def _apply(fleet: Fleet, member: int, version: int, spec: StreamAppMemberSpec) -> None:
    plane = fleet.planes[member]
    plane.version = version
    plane.apply(spec)


def test_a_task_handed_on_after_its_old_owners_pod_ended_is_no_double_owner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fleet = _fleet(monkeypatch)
    _apply(fleet, 2, 100, _spec(2, 1, {7: 1}))
    fleet.ended["uid-2"], fleet.seen = 150, 150  # member 2's pod deleted at 150
    _apply(fleet, 1, 200, _spec(1, 2, {7: 2}))  # task 7 handed to member 1 at 200
    fleet.seen = 200
    assert fleet.violations.double_owned == []
    assert fleet.handed_on == {7}


def test_a_task_handed_on_while_its_old_owners_pod_ran_is_a_double_owner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fleet = _fleet(monkeypatch)
    _apply(fleet, 2, 100, _spec(2, 1, {7: 1}))
    _apply(fleet, 1, 200, _spec(1, 2, {7: 2}))
    fleet.ended["uid-2"], fleet.seen = 250, 250  # member 2's pod ended only after the handover
    assert fleet.violations.double_owned == [
        "task 7 active on [2, 1]: member 1 took it at version 200, member 2's pod ended only at version 250"
    ]


def test_a_double_owner_waits_for_the_watch_to_reach_its_version(monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = _fleet(monkeypatch)
    _apply(fleet, 2, 100, _spec(2, 1, {7: 1}))
    _apply(fleet, 1, 200, _spec(1, 2, {7: 2}))
    assert fleet.suspects and fleet._violations.double_owned == []  # the watch is at 0: undecided
    fleet.seen = 210  # the watch passed 200 and member 2's pod never ended: it still ran
    assert fleet.violations.double_owned == [
        "task 7 active on [2, 1]: member 1 took it at version 200, member 2's pod still ran"
    ]
