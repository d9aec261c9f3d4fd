"""Stuck members (`rebalance.stuck`): a batch round that outlasts batchTimeout gets its member's pod
replaced, within the rollout's maxUnavailable, longest stuck first — never all at once."""

from __future__ import annotations

from streamapp.rebalance.rollout import MemberPod, RolloutConfig, RolloutStep, rollout_step
from streamapp.rebalance.stuck import replace_stuck

NOTHING = RolloutStep({}, (), 4, ())


def ready(*members: int, not_ready: tuple[int, ...] = ()) -> dict[int, MemberPod]:
    pods = {m: MemberPod(m, "rev", True) for m in members}
    pods.update({m: MemberPod(m, "rev", False) for m in not_ready})
    return pods


def test_a_round_past_the_timeout_replaces_its_member_and_says_why() -> None:
    step = replace_stuck(NOTHING, ready(0, 1, 2, 3), {2: 100.0}, 4, 300.0, 1, 412.0)
    assert (step.delete, step.stuck) == ((2,), (2,))
    assert (
        step.reasons[2] == "its batch round has run 312 s, over batchTimeout (300 s): its executor is stuck"
    )


def test_a_round_not_yet_past_the_timeout_wakes_the_operator_when_it_will_be() -> None:
    step = replace_stuck(NOTHING, ready(0, 1, 2, 3), {2: 100.0, 3: 50.0}, 4, 300.0, 1, 200.0)
    assert (step.delete, step.stuck, step.wake_at) == ((), (), 350.0)
    assert replace_stuck(NOTHING, ready(0, 1), {}, 2, 300.0, 1, 200.0) is NOTHING


def test_never_more_than_max_unavailable_at_once_longest_stuck_first() -> None:
    """Two stuck members, one allowed unavailable: the one stuck longer goes, the other once the
    first is back; a pod not ready or missing takes the budget; two allowed take both."""
    stuck = {1: 20.0, 2: 10.0}
    one = replace_stuck(NOTHING, ready(0, 1, 2, 3), stuck, 4, 60.0, 1, 100.0)
    assert one.stuck == (2,)
    busy = replace_stuck(NOTHING, ready(0, 1, 2, not_ready=(3,)), stuck, 4, 60.0, 1, 100.0)
    assert busy.stuck == ()
    back = replace_stuck(NOTHING, ready(0, 1, 3, not_ready=(2,)), {1: 20.0}, 4, 60.0, 1, 100.0)
    assert back.stuck == ()
    gone = replace_stuck(NOTHING, ready(0, 1, 3), {1: 20.0}, 4, 60.0, 1, 100.0)
    assert gone.stuck == (), "member 2's pod is missing (being deleted): it is unavailable too"
    two = replace_stuck(NOTHING, ready(0, 1, 2, 3), stuck, 4, 60.0, 2, 100.0)
    assert two.stuck == (2, 1) and two.delete == (1, 2)


def test_a_rollout_deletion_counts_against_the_budget_and_a_stuck_handoff_ends() -> None:
    """The rollout restarts member 3 in place this step: a stuck member waits. A member stuck while
    handing off (it cannot acknowledge) is replaced instead of waiting out handoffTimeout."""
    restart = RolloutStep({}, (3,), 3, (3,))
    assert replace_stuck(restart, ready(0, 1, 2, 3), {1: 0.0}, 4, 60.0, 1, 100.0).stuck == ()
    pods = {m: MemberPod(m, "old", True) for m in range(4)}
    handing = rollout_step(pods, 4, "new", {m: 3 for m in range(4)}, RolloutConfig(), 100.0)
    assert handing.retiring == {3: 100.0}
    step = replace_stuck(handing, pods, {3: 0.0}, 4, 60.0, 1, 100.0)
    assert (step.retiring, step.delete, step.stuck) == ({}, (3,), (3,))


def test_members_not_wanted_or_not_ready_and_a_zero_timeout_are_left_alone() -> None:
    pods = ready(0, 1, 4, not_ready=(2,))
    assert replace_stuck(NOTHING, pods, {2: 0.0, 4: 0.0}, 4, 60.0, 4, 100.0).stuck == ()
    assert replace_stuck(NOTHING, ready(0, 1), {1: 0.0}, 2, 0.0, 1, 1_000.0) is NOTHING
