"""Counting a streak of write conflicts (controller.conflicts): reported once, on the object named."""

from __future__ import annotations

import json

from streamapp.controller.conflicts import CONFLICTS_BEFORE_REPORT, Streak, conflicting_object

CONFLICT = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "reason": "Conflict",
        "code": 409,
        "details": {"name": "counts-1", "group": "streamapp.dev", "kind": "streamappmembers"},
        "message": "the object has been modified",
    }
)


def test_the_object_is_named_from_the_status_details() -> None:
    assert conflicting_object(CONFLICT) == "streamappmembers counts-1"
    assert conflicting_object("not json") == "object (unnamed)"
    assert conflicting_object(None) == "object (unnamed)"


def test_a_streak_on_one_object_is_reported_once_when_it_reaches_the_threshold() -> None:
    streak = Streak()
    reports = [streak.conflicted("streamappmembers counts-1") for _ in range(3 * CONFLICTS_BEFORE_REPORT)]
    assert reports.index(True) == CONFLICTS_BEFORE_REPORT - 1
    assert reports.count(True) == 1
    assert "streamappmembers counts-1" in streak.message("the object has been modified")


def test_conflicts_on_alternating_objects_or_with_a_success_between_are_no_streak() -> None:
    alternating = Streak()
    for n in range(3 * CONFLICTS_BEFORE_REPORT):
        assert not alternating.conflicted(f"streamappmembers counts-{n % 2}")
    interrupted = Streak()
    for _ in range(3):
        for _ in range(CONFLICTS_BEFORE_REPORT - 1):
            assert not interrupted.conflicted("streamapps counts")
        interrupted.ended()


def test_after_a_success_a_new_streak_is_reported_again() -> None:
    streak = Streak()
    assert [streak.conflicted("streamapps counts") for _ in range(CONFLICTS_BEFORE_REPORT)][-1]
    streak.ended()
    assert [streak.conflicted("streamapps counts") for _ in range(CONFLICTS_BEFORE_REPORT)][-1]
