"""What the operator shows of a member damped for flapping: `flapping` in the app's status row, the
`streamapp_flapping_members` gauge, and the MemberFlapping Event (a Warning) the engine raises."""

from __future__ import annotations

from dataclasses import replace

from streamapp.api.streamapp import StreamAppStatus
from streamapp.controller.metrics import Metrics
from streamapp.controller.status import members_summary
from streamapp.rebalance import AppConfig, Assignment, EventKind, MemberView, RebalanceConfig, plan
from streamapp.rebalance.model import Flap

APP = AppConfig(4, 2, RebalanceConfig())


def settled() -> Assignment:
    views = [MemberView(0), MemberView(1)]
    assignment = Assignment.empty(4)
    for _ in range(5):
        assignment = plan(APP, views, assignment, 0.0).assignment
    return assignment


def test_a_damped_member_shows_its_losses_and_since_when_it_is_up() -> None:
    assignment = replace(settled(), flaps=(Flap(1, (100.0, 200.0), True, 1_795_000_000.0),))
    rows = [
        row.to_dict() for row in members_summary("counts", assignment, [MemberView(0), MemberView(1)], {}, 2)
    ]
    assert "flapping" not in rows[0]
    assert rows[1]["flapping"] == {"losses": 2, "upSince": "2026-11-18T11:06:40Z"}
    StreamAppStatus.from_dict({"members": rows})  # the typed model reads it back
    down = replace(assignment, flaps=(Flap(1, (100.0, 200.0), True, None),))
    assert [
        row.to_dict()
        for row in members_summary("counts", down, [MemberView(0), MemberView(1, alive=False)], {}, 2)
    ][1]["flapping"] == {"losses": 2}


def test_the_gauge_counts_damped_members_and_is_forgotten_with_the_app() -> None:
    metrics = Metrics()
    labels = {"namespace": "ns", "app": "counts"}
    flaps = (Flap(1, (1.0, 2.0), True, None), Flap(0, (2.0,), False, None))
    metrics.observe_assignment(labels, replace(settled(), flaps=flaps), [MemberView(0), MemberView(1)])
    assert metrics.registry.get_sample_value("streamapp_flapping_members", labels) == 1
    metrics.forget(labels)
    assert metrics.registry.get_sample_value("streamapp_flapping_members", labels) is None


def test_the_second_loss_raises_a_warning_event_naming_the_member() -> None:
    assignment = settled()
    views = [MemberView(0), MemberView(1, alive=False, returning=True, return_seconds=40.0)]
    assignment = plan(APP, views, assignment, 10.0).assignment
    assignment = plan(APP, [MemberView(0), MemberView(1)], assignment, 50.0).assignment
    result = plan(APP, views, assignment, 100.0)
    [event] = [e for e in result.events if e.kind == EventKind.MEMBER_FLAPPING]
    assert event.warning and event.member == 1 and "lost 2 times within 600s" in event.detail
