"""`streamapp status`'s table, from a StreamApp and its StreamAppMembers as the API serves them."""

from __future__ import annotations

from typing import Any

from api_samples import app

from streamapp.api.member import StreamAppMember
from streamapp.api.streamapp import StreamApp
from streamapp.appstatus import Observed, render


def member(
    member_id: int, active: list[tuple[int, int]], standby: list[int], reports: list[dict[str, Any]]
) -> StreamAppMember:
    return StreamAppMember.from_resource(
        {
            "apiVersion": "streamapp.dev/v1alpha1",
            "kind": "StreamAppMember",
            "metadata": {"name": f"counts-{member_id}", "namespace": "ns"},
            "spec": {
                "app": "counts",
                "memberId": member_id,
                "active": [{"task": t, "epoch": e} for t, e in active],
                "standby": standby,
            },
            "status": {"tasks": reports},
        }
    )


def observed() -> Observed:
    body = app(partitions=3, replicas=2)
    body["metadata"]["namespace"] = "ns"
    body["status"] = {
        "generation": 7,
        "readyReplicas": 1,
        "inputLag": 1234,
        "tasks": {"active": 2, "reserved": 1},
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "MembersLost",
                "message": "1 of 2 members lost",
                "lastTransitionTime": "2026-11-26T00:00:00Z",
            }
        ],
        "members": [{"id": 0, "phase": "Ready", "active": 2}, {"id": 1, "phase": "Lost", "active": 1}],
    }
    return Observed(
        StreamApp.from_resource(body),
        (
            member(
                0,
                [(0, 3), (1, 2)],
                [2],
                [
                    {"task": 0, "role": "active", "epoch": 3, "appliedOffset": 45000, "inputLag": 120},
                    {"task": 1, "role": "active", "epoch": 2, "appliedOffset": 9000, "inputLag": 0},
                    {"task": 2, "role": "standby", "lag": 40},
                ],
            ),
            member(1, [(2, 5)], [], []),
        ),
    )


def test_one_row_per_task_with_owner_epoch_progress_and_other_copies() -> None:
    lines = render(observed())
    assert lines[0].startswith("ns/counts  replicas 1/2 ready · 3 tasks · generation 7 · 2 active")
    assert "input lag 1,234" in lines[0]
    assert "  Ready: False MembersLost: 1 of 2 members lost" in lines
    assert any(line.startswith("m1  Lost") for line in lines)
    rows = {line.split()[0]: line.split() for line in lines if line[:4].strip().isdigit()}
    assert rows["0"][:5] == ["0", "m0", "3", "45,000", "120"]
    assert rows["2"][:5] == ["2", "m1", "5", "-", "-"], "held for a lost member: nothing reported"
    assert " ".join(rows["2"][5:]) == "m0 standby lag 40"
    assert "\x1b[" not in "".join(lines), "no escapes unless on a terminal"


def test_the_autoscalers_decision_and_what_it_waits_for() -> None:
    shown = observed()
    status = {
        **shown.app.status.to_dict(),
        "autoscaling": {
            "replicas": 6,
            "action": "Wait",
            "reason": "the scale-out from 2 to 6 members is taking effect; its lag is not new demand",
            "waitingFor": "2 warmups to come within acceptableRecoveryLag (10,000): task 4 on member 5 52,000 records behind",
            "neededReplicas": 6,
        },
    }
    lines = render(
        Observed(StreamApp.from_resource({**shown.app.to_dict(), "status": status}), shown.members)
    )
    assert (
        "  Autoscaling: Wait · 6 members wanted, 6 needed: the scale-out from 2 to 6 members is taking effect"
        in "\n".join(lines)
    )
    assert any(line.startswith("    waiting for 2 warmups") for line in lines)
    assert not any("Autoscaling" in line for line in render(shown)), (
        "an app that does not autoscale shows none"
    )
