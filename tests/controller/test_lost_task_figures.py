"""What the operator reads and shows for `lostTaskRecovery: auto`: restore sizes and rates from the
members' reports, pod start times from the pods, each lost member's expected return, and the engine's
choice in the app's status (`lostTasks`), Events and metrics."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

from api_samples import app_model
from test_controller_core import pod

from streamapp.api.fields import wire_name
from streamapp.api.streamapp import StreamAppStatus
from streamapp.controller import costreports
from streamapp.controller.metrics import Metrics
from streamapp.controller.observe import PodState, member_views, pod_start_seconds
from streamapp.controller.reconcile import _announce_lost
from streamapp.controller.status import STEP_FIELDS, lost_tasks, members_summary, step_patch
from streamapp.rebalance import AppConfig, Assignment, LostMember, MemberView, RebalanceConfig, plan
from streamapp.rebalance.costs import Costs


def reporting(member: int, uid: str, rows: dict[int, int], rate: float | None) -> dict[str, Any]:
    return {
        "spec": {"memberId": member},
        "status": {
            "podUID": uid,
            "observedGeneration": 1,
            "restoreRate": rate,
            "tasks": [{"task": t, "role": "active", "epoch": 1, "restoreRows": n} for t, n in rows.items()],
        },
    }


def test_restore_sizes_and_rates_count_from_any_report() -> None:
    """Like store epochs, a lost member's last report still tells how big its tasks are (its pod is
    gone, the store is not); a negative size reads as 0."""
    views = member_views(
        pods=[pod(0, "p0")],
        members=[reporting(0, "p0", {0: 10}, 5_000.0), reporting(1, "p1-gone", {1: 200_000, 3: -4}, None)],
        zones={},
        wanted=2,
    )
    by_id = {v.id: v for v in views}
    assert by_id[0].restore_rows == {0: 10} and by_id[0].restore_rate == 5_000.0
    assert by_id[1].restore_rows == {1: 200_000, 3: 0} and by_id[1].restore_rate is None


def test_local_state_a_member_keeps_of_a_task_it_does_not_run_counts_as_the_input_since() -> None:
    """A copy given up leaves its checkpoint on the member's volume; reported (`localCopies`), it is
    the member's lag for that task: the furthest position any report gives the task, lost owner
    included, minus the copy's. A task the member runs keeps the lag its copy reports, and a report
    from an earlier pod says nothing of the volume now."""
    survivor = reporting(0, "p0", {0: 10}, 5_000.0)
    survivor["status"]["localCopies"] = [
        {"task": 1, "appliedOffset": 900},
        {"task": 0, "appliedOffset": 1},
        {"task": 2, "appliedOffset": 50},
    ]
    lost = reporting(1, "p1-gone", {1: 200_000}, None)
    lost["status"]["tasks"][0]["appliedOffset"] = 1_539
    standby = {"task": 2, "role": "standby", "appliedOffset": 70, "lag": 30}
    lost["status"]["tasks"].append(standby)
    views = {v.id: v for v in member_views([pod(0, "p0")], [survivor, lost], {}, wanted=2)}
    assert views[0].lags == {1: 639, 2: 50}, "task 0 runs there: its own report says"
    restarted = {v.id: v for v in member_views([pod(0, "p0-new")], [survivor, lost], {}, wanted=2)}
    assert restarted[0].lags == {}


def test_a_missing_pod_or_one_the_operator_deletes_to_restart_is_returning() -> None:
    """The operator re-creates a wanted member's missing pod in the same reconcile, and deletes a pod
    with its restart mark only to re-create it: both are on their way back. A pod someone else is
    deleting is not, nor is a member beyond `replicas` without a pod, nor one whose pod the API
    server refused at the last try."""
    restarting = pod(0, "p0", ready=False, deleting=True)
    restarting["metadata"]["annotations"] = {"streamapp.dev/operator-restart": "1"}
    evicted = pod(2, "p2", ready=False, deleting=True)
    views = {
        v.id: v for v in member_views([restarting, evicted], [reporting(3, "p3", {}, None)], {}, wanted=3)
    }
    assert views[0].returning and views[1].returning
    assert not views[2].returning and not views[3].returning
    refused = {v.id: v for v in member_views([restarting, evicted], [], {}, wanted=3, refused=frozenset({1}))}
    assert not refused[1].returning, "a missing pod the API server refused to create is not coming back"


def test_pod_start_is_read_from_creation_or_the_containers_last_start_to_ready() -> None:
    fresh = pod(0, "p0")
    fresh["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    fresh["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:42Z"
    restarted = pod(1, "p1")
    restarted["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    restarted["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:10:30Z"
    restarted["status"]["containerStatuses"] = [
        {"name": "executor", "restartCount": 1, "state": {"running": {"startedAt": "2026-01-01T00:10:00Z"}}}
    ]
    starting = pod(2, "p2", ready=False)
    garbled = pod(3, "p3")
    garbled["metadata"]["creationTimestamp"] = "yesterday"
    states = [PodState.of(b) for b in (fresh, restarted, starting, garbled)]
    assert [s.start_seconds for s in states if s is not None] == [42.0, 30.0, None, None]
    assert pod_start_seconds(s for s in states if s is not None) == 36.0
    assert pod_start_seconds([]) is None


def test_a_lost_members_return_is_its_restart_else_the_apps_else_the_pod_start() -> None:
    views = [
        MemberView(0),
        MemberView(1, alive=False),
        MemberView(2, alive=False),
        MemberView(3, alive=False),
    ]
    measured = Costs(restart={1: 12.0, 2: 30.0}, pod_start=40.0)
    estimated = {v.id: v.return_seconds for v in costreports.with_return_estimates(views, measured)}
    assert estimated == {0: None, 1: 12.0, 2: 30.0, 3: 21.0}
    alone = {v.id: v.return_seconds for v in costreports.with_return_estimates(views, Costs(pod_start=40.0))}
    assert alone == {0: None, 1: 40.0, 2: 40.0, 3: 40.0}
    assert costreports.with_return_estimates(views, Costs())[1].return_seconds is None


def test_the_apps_restore_rate_is_kept_when_the_members_that_measured_it_leave() -> None:
    """The median of the members' rates, from any report, written to the app's status; once the
    members that measured it are scaled in (their StreamAppMembers deleted) the status keeps it. A
    rate that is not a positive number is not a measure."""
    app = app_model()
    state = PodState.of(pod(0, "p0"))
    assert state is not None
    members = [
        reporting(0, "p0", {}, 4_000.0),
        reporting(1, "p1-gone", {}, 6_000.0),
        reporting(2, "p2", {}, None),
        reporting(3, "p3", {}, -1.0),
        reporting(4, "p4", {}, "fast"),  # type: ignore[arg-type]
    ]
    known = costreports.known(app.status, members, {0: state}, claims=True)
    assert known.restore_rate == 5_000.0
    status = costreports.with_costs(app.status, known)
    assert step_patch(status)["restoreRate"] == 5_000.0, "written by the reconcile step"
    later = costreports.known(status, [reporting(2, "p2", {}, None)], {}, claims=True)
    assert later.restore_rate == 5_000.0, "the members that measured it are gone; the app keeps it"
    assert costreports.known(status, [reporting(2, "p2", {}, 812.37)], {}, claims=True).restore_rate == 812.0


def test_every_status_field_is_written_by_the_reconcile_step() -> None:
    """A field the step computes but does not list is never written: `restoreRate` was, in the large
    cluster run (`lastRebalance` is written only with a change)."""
    wire = {wire_name(f) for f in dataclasses.fields(StreamAppStatus)}
    assert wire - set(STEP_FIELDS) == {"lastRebalance"}


def test_a_member_that_has_not_measured_its_rate_restores_at_the_apps() -> None:
    """Without it, a bounce after a scale-in was weighed with no rate ("not measured") and its tasks
    restored elsewhere whatever that cost; with it, the engine waits for a member back sooner than
    a restore would end."""
    views = [MemberView(0, restore_rate=2_000.0), MemberView(1), MemberView(2, alive=False)]
    filled = costreports.with_restore_rates(views, Costs(restore_rate=1_000.0))
    assert [v.restore_rate for v in filled] == [2_000.0, 1_000.0, 1_000.0]
    assert costreports.with_restore_rates(views, Costs()) == views

    app, first, measured = lost_views()
    bounce = [replace(v, restore_rate=None) for v in measured]
    [blind] = plan(app, bounce, first, 10.0).lost
    assert blind.choice == "Restore" and "not measured" in blind.reason
    known = costreports.with_restore_rates(bounce, Costs(restore_rate=1_000.0))
    [weighed] = plan(app, known, first, 10.0).lost
    assert weighed.choice == "Wait" and weighed.restore_seconds == 100.0


def lost_views() -> tuple[AppConfig, Assignment, list[MemberView]]:
    """Member 1 of 2 lost, visibly returning in 40 s; member 0 restores 1,000 rows a second, so
    restores of its 100,000-row tasks would take 100 s. Member 0 reports its own tasks caught up (a
    copy it held without a report would count as a restore in full ahead of theirs)."""
    app = AppConfig(4, 2, RebalanceConfig())
    first = plan(app, [MemberView(0), MemberView(1)], Assignment(), 0.0).assignment
    views = [
        MemberView(
            0,
            lags={0: 0, 2: 0},
            acked_generation=1,
            restore_rate=1_000.0,
            restore_rows={0: 100_000, 2: 100_000},
        ),
        MemberView(
            1,
            alive=False,
            returning=True,
            return_seconds=40.0,
            acked_generation=1,
            restore_rows={1: 100_000, 3: 100_000},
        ),
    ]
    return app, first, views


def lost_plan() -> tuple[list[MemberView], Assignment, tuple[LostMember, ...]]:
    """The lost member's tasks wait (back in 40 s, restores 100 s), and member 0 warms one of them
    as insurance: a second would share its throughput."""
    app, first, views = lost_views()
    result = plan(app, views, first, 10.0)
    return views, result.assignment, result.lost


def test_the_status_shows_the_choice_and_its_figures() -> None:
    views, assignment, lost = lost_plan()
    [member] = lost
    assert lost_tasks(member).to_dict() == {
        "choice": "Wait",
        "held": 2,
        "restoring": 0,
        "reason": "waiting for the member: it is expected back 40 s after its loss; a restore elsewhere would "
        "end in ~100 s; 1 warming elsewhere in case it is late",
        "expectedBackSeconds": 40.0,
        "restoreSeconds": 100.0,
        "restoreRows": 200_000,
        "restoreRate": 1_000.0,
    }
    rows = [row.to_dict() for row in members_summary("counts", assignment, views, {}, 2, lost)]
    assert rows[1]["phase"] == "Restarting" and rows[1]["lostTasks"]["choice"] == "Wait"
    assert "lostTasks" not in rows[0]


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str]] = []

    def event(self, app: Any, reason: str, message: str, warning: bool = False) -> None:
        del app, warning
        self.posted.append((reason, message))


def test_an_event_says_when_a_choice_is_made_or_changes() -> None:
    views, assignment, lost = lost_plan()
    kube = Events()
    app = app_model()
    _announce_lost(kube, app, lost)  # type: ignore[arg-type]
    assert kube.posted == [("WaitingForMember", f"member 1: {lost[0].reason}")]
    shown = StreamAppStatus(members=members_summary("counts", assignment, views, {}, 2, lost))
    _announce_lost(kube, replace(app, status=shown), lost)  # type: ignore[arg-type]
    assert len(kube.posted) == 1, "shown already: no second Event"


def test_metrics_show_held_tasks_by_choice_and_forget_members_no_longer_lost() -> None:
    _, _, lost = lost_plan()
    metrics = Metrics()
    labels = {"namespace": "ns", "app": "counts"}

    def sample(name: str, **extra: str) -> float | None:
        return metrics.registry.get_sample_value(name, {**labels, **extra})

    metrics.observe_lost(labels, lost)
    assert sample("streamapp_lost_tasks", choice="wait") == 2
    assert sample("streamapp_lost_tasks", choice="restore") == 0
    assert sample("streamapp_lost_member_expected_back_seconds", member="1") == 40.0
    assert sample("streamapp_lost_member_restore_seconds", member="1") == 100.0
    metrics.observe_lost(labels, ())
    assert sample("streamapp_lost_tasks", choice="wait") == 0
    assert sample("streamapp_lost_member_expected_back_seconds", member="1") is None
    assert sample("streamapp_lost_member_restore_seconds", member="1") is None


def test_tasks_held_for_a_lost_member_are_reserved_not_active() -> None:
    """Nobody processes them: counted as active they were invisible to an alert."""
    views, assignment, _ = lost_plan()
    metrics = Metrics()
    labels = {"namespace": "ns", "app": "counts"}
    metrics.observe_assignment(labels, assignment, views)
    by_state = {
        state: metrics.registry.get_sample_value("streamapp_tasks", {**labels, "state": state})
        for state in ("active", "reserved", "revoking", "unassigned")
    }
    assert by_state == {"active": 2, "reserved": 2, "revoking": 0, "unassigned": 0}


def test_a_deleted_apps_series_are_dropped_and_no_other_apps() -> None:
    views, assignment, lost = lost_plan()
    metrics = Metrics()
    gone, kept = {"namespace": "ns", "app": "counts"}, {"namespace": "ns", "app": "other"}
    for labels in (gone, kept):
        metrics.observe_assignment(labels, assignment, views)
        metrics.observe_lost(labels, lost)
        metrics.observe_input_lag(labels, 12)
        metrics.rebalances.labels(**labels).inc()
    metrics.forget(gone)
    names = {s.labels.get("app") for family in metrics.registry.collect() for s in family.samples}
    assert "counts" not in names and "other" in names


def test_an_epoch_beyond_what_any_store_reaches_is_not_believed() -> None:
    """A report naming a store epoch near int64's limit: handing out the next one would fail every
    member write with 422 from then on; the report's figure is ignored instead."""
    from streamapp.api.member import MAX_EPOCH, TaskReport
    from streamapp.controller.observe import store_epochs

    reports = [
        TaskReport(task=0, role="active", store_epoch=2**63 - 1),
        TaskReport(task=1, role="active", store_epoch=7, fenced_by=-3),
        TaskReport(task=2, role="active", store_epoch=MAX_EPOCH),
    ]
    assert store_epochs(reports) == {1: 7, 2: MAX_EPOCH}


def test_the_operator_serves_its_process_metrics_too() -> None:
    """A registry of one's own has no process collector by default: memory and CPU went missing."""
    registry = Metrics().registry
    assert registry.get_sample_value("process_resident_memory_bytes") is not None
    assert registry.get_sample_value("process_cpu_seconds_total") is not None
