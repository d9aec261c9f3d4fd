"""A damaged intent is rebuilt from what the members were told, never trusted or fatal."""

from __future__ import annotations

import pytest

from streamapp.controller.intentrebuild import intent_from_members, read_intent
from streamapp.rebalance import AppConfig, Assignment, MemberView, member_targets, plan


def member(member_id: int, generation: int, **target: list[object]) -> dict[str, object]:
    return {"spec": {"app": "counts", "memberId": member_id, "generation": generation, **target}}


def test_unreadable_or_misfit_intents_are_refused_with_a_reason() -> None:
    assert read_intent(None, 4) == Assignment()
    with pytest.raises(ValueError, match="unreadable"):
        read_intent({"tasks": [{"epoch": "x"}]}, 4)
    with pytest.raises(ValueError, match="unreadable"):
        read_intent({"tasks": "garbage"}, 4)
    with pytest.raises(ValueError, match="2 tasks for 4 partitions"):
        read_intent({"tasks": [{}, {}]}, 4)


def test_members_targets_become_the_assignment_they_describe() -> None:
    members = [
        member(0, 5, active=[{"task": 0, "epoch": 3}], revoking=[{"task": 1, "epoch": 2}], standby=[2]),
        member(1, 4, active=[{"task": 2, "epoch": 1}], warmup=[1]),
    ]
    rebuilt = intent_from_members(members, 4)
    assert rebuilt.generation == 5
    assert [t.active for t in rebuilt.tasks] == [0, 0, 1, None]
    assert [t.epoch for t in rebuilt.tasks] == [3, 2, 1, 0]
    assert rebuilt.tasks[1].revoking_since == 5 and rebuilt.tasks[1].warmups == (1,)
    assert rebuilt.tasks[2].standbys == (0,)


def test_a_plan_from_the_rebuilt_intent_keeps_every_owner_and_epoch() -> None:
    config = AppConfig(6, 3)
    views = [MemberView(m, acked_generation=1) for m in range(3)]
    settled = plan(config, views, Assignment(), 0.0).assignment
    targets = member_targets(settled)
    members = [
        member(
            m,
            settled.generation,
            active=[{"task": t, "epoch": e} for t, e in target.active.items()],
            standby=list(target.standby),
        )
        for m, target in targets.items()
    ]
    rebuilt = intent_from_members(members, 6)
    again = plan(config, views, rebuilt, 1.0).assignment
    assert [(t.active, t.epoch) for t in again.tasks] == [(t.active, t.epoch) for t in settled.tasks]


def test_a_missing_intent_while_members_hold_targets_is_damage_and_the_generation_never_goes_back() -> None:
    """status.intent wiped on a running app whose members applied generation 7: the intent is rebuilt
    from their specs, and the next plan's generation is above 7, so every executor applies it and a
    revocation needs a real acknowledgement (acks are the generation applied)."""
    from streamapp.controller.intentrebuild import floor_generation, outdated

    members = [
        {
            **member(0, 7, active=[{"task": 0, "epoch": 2}, {"task": 2, "epoch": 2}]),
            "status": {"observedGeneration": 7},
        },
        {
            **member(1, 6, active=[{"task": 1, "epoch": 2}, {"task": 3, "epoch": 2}]),
            "status": {"observedGeneration": 7},
        },
    ]
    wiped = read_intent(None, 4)
    assert (
        outdated(wiped, members)
        == "status.intent is missing while the members hold targets up to generation 7"
    )
    assert outdated(wiped, []) is None, "a new app has no intent yet"
    rebuilt = floor_generation(intent_from_members(members, 4), members)
    assert rebuilt.generation == 7
    views = [MemberView(m, acked_generation=7) for m in range(3)]
    scaled = plan(AppConfig(4, 3), views, rebuilt, 0.0)
    assert scaled.changed and scaled.assignment.generation == 8
    revoked = [t for t in scaled.assignment.tasks if t.revoking_since is not None]
    assert all(t.revoking_since == 8 for t in revoked)
    # An older intent (a status restored from a backup) is floored the same way.
    stale = Assignment(generation=3, tasks=rebuilt.tasks)
    assert floor_generation(stale, members).generation == 7


def test_an_intent_older_than_the_members_targets_is_damage() -> None:
    """A status restored from an older backup: its intent (generation 5) is behind what member 0 was
    given (generation 7). Planned from it with the generation floored, member 1 would get task 0 back
    at epoch 1 as news; it is rebuilt from the members instead. An intent at or past them is fine."""
    from streamapp.controller.intentrebuild import outdated

    members = [
        member(0, 7, active=[{"task": 0, "epoch": 2}, {"task": 2, "epoch": 1}]),
        member(1, 5, active=[{"task": 1, "epoch": 1}, {"task": 3, "epoch": 1}]),
    ]
    older = intent_from_members(
        [member(0, 5, active=[{"task": 2, "epoch": 1}]), member(1, 5, active=[{"task": 0, "epoch": 1}])], 4
    )
    assert older.generation == 5
    assert outdated(older, members) == (
        "status.intent is at generation 5, behind the members' targets at generation 7"
    )
    current = intent_from_members(members, 4)
    assert outdated(current, members) is None
