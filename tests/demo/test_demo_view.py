"""The demo's live table, rendered from a status snapshot as the API server returns it."""

from __future__ import annotations

import io
from typing import Any

from kubernetes import client

from demo.driver import pod_state
from demo.view import RESET, Screen, Snapshot, fit, render, rows


def member(member_id: int, active: list[int], reports: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"counts-{member_id}"},
        "spec": {"memberId": member_id, "active": [{"task": t, "epoch": 3} for t in active]},
        "status": {"tasks": reports},
    }


def snapshot(**changes: Any) -> Snapshot:
    base: dict[str, Any] = {
        "elapsed": 75.0,
        "phase": "scale-out: warming, then handing off",
        "partitions": 4,
        "members": [
            member(0, [0, 1], [{"task": 0, "role": "active"}, {"task": 1, "role": "active"}]),
            member(1, [2, 3], [{"task": 2, "role": "active"}, {"task": 3, "role": "active"}]),
            member(
                2, [], [{"task": 1, "role": "standby", "lag": 5}, {"task": 0, "role": "warmup", "lag": 1200}]
            ),
        ],
        "pods": {"counts-0": "Running", "counts-1": "Running (1 restart)"},
        "committed": {0: 900, 1: 1000, 2: 1000, 3: 0},
        "input_end": {0: 1000, 1: 1000, 2: 1010, 3: 40},
        "last_commit_age": {0: 0.5, 1: 1.25, 2: 12.0, 3: None},
    }
    return Snapshot(**{**base, **changes})


def test_rows_show_owner_from_spec_copies_from_reports_and_lag_from_outside() -> None:
    found = {row.task: row for row in rows(snapshot())}
    assert [found[t].owner for t in range(4)] == ["m0", "m0", "m1", "m1"]
    assert found[0].copies == "m2 warmup lag 1,200"
    assert found[1].copies == "m2 standby lag 5"
    assert found[2].copies == "-"
    assert [found[t].lag for t in range(4)] == [100, 0, 10, 40]
    assert found[1].last_commit == "1.2s ago"
    assert found[3].last_commit == "never"


def test_a_task_without_an_owner_shows_a_dash_and_revoking_copies_come_before_warmups() -> None:
    members = [
        member(0, [], [{"task": 0, "role": "warmup", "lag": 7}, {"task": 0, "role": "revoking"}]),
    ]
    found = rows(snapshot(members=members, partitions=1))
    assert found[0].owner == "-"
    assert found[0].copies == "m0 revoking, m0 warmup lag 7"


def test_render_without_colour_has_header_members_and_one_line_per_task() -> None:
    lines = render(snapshot(events=["a", "b"]), color=False)
    assert lines[0] == "streamapp demo  01:15  scale-out: warming, then handing off"
    assert lines[1] == "input 3,050 records, committed 2,900"
    assert lines[2] == ("members: m0 Running 2 active · m1 Running (1 restart) 2 active · m2 no pod 0 active")
    assert lines[5].split() == ["0", "m0", "100", "900", "0.5s", "ago", "m2", "warmup", "lag", "1,200"]
    assert lines[-2:] == ["a", "b"]
    assert not any("\x1b" in line for line in lines)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_screen_redraws_in_place_on_a_terminal() -> None:
    out = Terminal()
    screen = Screen(out)
    screen.draw(["one", "two", "three"])
    first = out.getvalue()
    screen.draw(["four"])
    second = out.getvalue()[len(first) :]
    assert first.startswith("\x1b[2Kone\n")  # nothing to move over the first time
    assert second.startswith("\x1b[3F")  # back up over the three lines drawn before
    assert second.endswith("four\n\x1b[J")  # and clear what the longer frame left below


def test_a_kept_frame_is_not_drawn_over() -> None:
    out = Terminal()
    screen = Screen(out)
    screen.draw(["table"])
    screen.keep()
    screen.say("result")
    assert out.getvalue().endswith("table\n\x1b[Jresult\n")


def test_screen_prints_a_frame_now_and_then_into_a_file() -> None:
    out = io.StringIO()
    screen = Screen(out, plain_every_s=3600)
    screen.draw(["first"])
    screen.draw(["second"])
    assert out.getvalue() == "first\n"


def test_pod_state_names_phase_and_restarts() -> None:
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="counts-0"),
        status=client.V1PodStatus(
            phase="Running",
            container_statuses=[
                client.V1ContainerStatus(name="executor", image="x", image_id="", ready=True, restart_count=2)
            ],
        ),
    )
    assert pod_state(pod) == "Running (2 restarts)"
    assert pod_state(client.V1Pod(metadata=client.V1ObjectMeta(), status=client.V1PodStatus())) == "Pending"


def test_lines_wider_than_the_terminal_are_cut_so_the_redraw_count_stays_right() -> None:
    assert fit("short", 80) == "short"
    assert fit("x" * 100, 80) == "x" * 79
    assert fit("\x1b[1m" + "y" * 100, 40).endswith(RESET)
