"""A member's executor writes its own status: its acknowledgement is believed only up to the target
the operator gave it, wherever the operator reads it (objects stored before the API server's rule)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streamapp.controller.handlers import Acknowledgements
from streamapp.controller.intentrebuild import floor_generation, intent_from_members, outdated
from streamapp.controller.observe import member_views
from streamapp.controller.status import digest

FORGED = 9_200_000_000_000_000_000


def member(member_id: int, generation: int, observed: int | None, uid: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": f"counts-{member_id}", "uid": uid or f"uid-{member_id}"},
        "spec": {
            "app": "counts",
            "memberId": member_id,
            "generation": generation,
            "active": [{"task": member_id, "epoch": 1}],
        },
    }
    if observed is not None:
        body["status"] = {"observedGeneration": observed}
    return body


def test_a_forged_acknowledgement_counts_only_up_to_the_members_target() -> None:
    members = [member(0, 3, FORGED), member(1, 3, 2)]
    views = {v.id: v for v in member_views([], members, {}, 2)}
    assert views[0].acked_generation == 3, "acknowledged no further than the target it was given"
    assert views[1].acked_generation == 2, "an honest acknowledgement below the target is kept"
    assert digest(members[0]).acknowledged == 3


def test_a_forged_acknowledgement_does_not_lift_the_generation_floor() -> None:
    """The intent wiped, rebuilt from the members: the floor is what the operator wrote (3), not what
    a member's executor claims to have applied."""
    members = [member(0, 3, FORGED), member(1, 2, 2)]
    rebuilt = floor_generation(intent_from_members(members, 2), members)
    assert rebuilt.generation == 3
    assert outdated(rebuilt, members) is None


def test_a_forged_acknowledgement_wakes_no_reconcile_past_the_target() -> None:
    seen = Acknowledgements()
    assert not seen.new("ADDED", member(0, 3, 3))
    assert not seen.new("MODIFIED", member(0, 3, FORGED)), "no newer acknowledgement than the target"
    assert seen.new("MODIFIED", member(0, 4, FORGED)), "a new target is acknowledged as far as it goes"


def test_an_acknowledgement_above_the_target_is_logged_once_per_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = member(0, 3, FORGED, uid="logged-once")
    with caplog.at_level(logging.WARNING, logger="streamapp.controller.acknowledgement"):
        for _ in range(3):
            member_views([], [body], {}, 1)
    assert len(caplog.records) == 1
    assert str(FORGED) in caplog.records[0].getMessage()
