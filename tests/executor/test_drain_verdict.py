"""The executor's SIGTERM path: finish the handoff when retiring, stop at once otherwise (pure decision,
plus the thread that applies it and the membership client feeding it)."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client
from recordingplane import RecordingPlane

from handclock import HandClock
from streamapp.api.member import StreamAppMemberSpec
from streamapp.executor.drain import NOTICE_SECONDS, Termination, follow_until_drained, verdict
from streamapp.executor.membership import MembershipClient


def spec(
    active: dict[int, int], revoking: dict[int, int], retiring: bool, generation: int = 4
) -> StreamAppMemberSpec:
    return StreamAppMemberSpec.of("counts", 1, generation, active, revoking, (), (), retiring)


OWNING = spec({0: 1, 2: 1}, {}, retiring=True)
REVOKING = spec({}, {0: 1}, retiring=True)
EMPTY = spec({}, {}, retiring=True)
TERM = Termination(since=100.0, drain_seconds=50.0)


def test_a_retiring_executor_follows_its_target_until_it_owns_nothing() -> None:
    assert verdict(TERM, OWNING, OWNING, 130.0) is None
    assert verdict(TERM, REVOKING, REVOKING, 130.0) is None, "a revoked task counts until it is dropped"
    assert verdict(TERM, EMPTY, OWNING, 130.0) is None, "the empty target is not applied yet"
    assert verdict(TERM, EMPTY, EMPTY, 130.0) == "handed every task over"


def test_the_drain_budget_bounds_every_drain() -> None:
    assert verdict(TERM, OWNING, OWNING, 150.0) == "drain budget spent"
    no_budget = Termination(since=100.0, drain_seconds=0.0)
    assert verdict(no_budget, OWNING, OWNING, 100.0) == "drain budget spent"


def test_an_executor_the_operator_restarts_stops_at_once() -> None:
    restart = Termination(since=100.0, drain_seconds=50.0, restart=True)
    assert verdict(restart, OWNING, OWNING, 100.0) == "restarted by the operator"


@pytest.mark.parametrize("seen", [None, spec({0: 1}, {}, retiring=False)])
def test_an_owning_executor_not_marked_retiring_waits_a_notice_period_for_the_mark(
    seen: StreamAppMemberSpec | None,
) -> None:
    applied = spec({0: 1}, {}, retiring=False)
    assert verdict(TERM, seen, applied, 100.0 + NOTICE_SECONDS / 2) is None
    assert verdict(TERM, seen, applied, 100.0 + NOTICE_SECONDS) == "not retiring"
    short = Termination(since=100.0, drain_seconds=NOTICE_SECONDS / 4)
    assert verdict(short, seen, applied, 100.0 + NOTICE_SECONDS / 4) == "drain budget spent"


@pytest.mark.parametrize("applied", [None, spec({}, {}, retiring=False)])
def test_an_executor_owning_nothing_stops_at_once_without_waiting_for_a_mark(
    applied: StreamAppMemberSpec | None,
) -> None:
    assert verdict(TERM, applied, applied, 100.0) == "owns no task"


def test_the_drain_thread_stops_the_executor_once_the_handoff_is_done() -> None:
    terminated, stop, clock = threading.Event(), threading.Event(), HandClock(0.0)
    targets = [(OWNING, OWNING)]
    thread = threading.Thread(
        target=follow_until_drained,
        args=(terminated, stop, 50.0, lambda: False, lambda: targets[-1], clock),
    )
    thread.start()
    assert not stop.wait(0.3), "nothing stops before SIGTERM"
    terminated.set()
    assert not stop.wait(0.5), "it stopped while still owning tasks"
    targets.append((EMPTY, EMPTY))
    thread.join(timeout=30)
    assert stop.is_set() and not thread.is_alive()


def test_the_drain_thread_ends_with_the_executor_when_processing_fails_first() -> None:
    terminated, stop = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=follow_until_drained, args=(terminated, stop, 50.0, lambda: False, lambda: (None, None))
    )
    thread.start()
    stop.set()
    thread.join(timeout=30)
    assert not thread.is_alive() and not terminated.is_set()


def test_the_membership_client_sees_the_retiring_mark_without_a_new_generation() -> None:
    plane = RecordingPlane()
    membership = MembershipClient(client.ApiClient(), "ns", "counts", 1, "uid", plane)  # type: ignore[arg-type]
    membership.report = lambda: None  # type: ignore[method-assign]
    membership.confirm = lambda generation, version: True  # type: ignore[method-assign]
    membership.notice({"metadata": {"uid": "m"}, "spec": spec({0: 1}, {}, retiring=False).to_dict()})
    applied = len(plane.applied)
    membership.notice({"metadata": {"uid": "m"}, "spec": spec({0: 1}, {}, retiring=True).to_dict()})
    assert len(plane.applied) == applied, "the same generation is not applied twice"
    assert membership.seen is not None and membership.seen.retiring
    assert membership.current is not None and membership.current.active_epochs() == {0: 1}
