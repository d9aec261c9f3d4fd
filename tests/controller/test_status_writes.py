"""A member report writes to the app only what it changed: lag stays out of the per-member rows, and
the status patch carries the fields that differ from the app as read (nothing when none does)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from appbody import app_body
from streamapp.api.streamapp import StreamApp
from streamapp.controller import reconcile
from streamapp.controller.metrics import Metrics
from streamapp.controller.observe import Observed, PodState
from streamapp.controller.status import app_status, digest, status_changes, step_patch
from streamapp.rebalance import AppConfig, Assignment, MemberView, plan

APP: dict[str, Any] = app_body(uid="u", generation=1, replicas=2, partitions=4)
APP["metadata"]["resourceVersion"] = "5"
MODEL = StreamApp.from_resource(APP)
PODS = {m: PodState(m, f"counts-{m}", f"uid-{m}", True, False, None) for m in (0, 1)}
NOW = "2026-01-01T00:00:00Z"


@dataclass
class RecordingKube:
    """Records status patches (handler-level logic only)."""

    patches: list[dict[str, Any]] = field(default_factory=list)
    versions: list[str | None] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def patch_app_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None = None
    ) -> dict[str, Any]:
        self.patches.append(status)
        self.versions.append(resource_version)
        return {**APP, "status": status}

    def event(self, app: Any, reason: str, message: str, warning: bool = False) -> None:
        self.events.append(reason)


def report(member: int, task_lags: dict[int, int]) -> dict[str, Any]:
    """Member `member`'s current pod reports its active tasks with these input lags."""
    tasks = [{"task": t, "role": "active", "epoch": 1, "inputLag": lag} for t, lag in task_lags.items()]
    return {
        "spec": {"memberId": member, "generation": 1},
        "status": {"podUID": f"uid-{member}", "tasks": tasks},
    }


def settled() -> tuple[Any, list[MemberView]]:
    views = [MemberView(m, acked_generation=1) for m in (0, 1)]
    return plan(AppConfig(4, 2), views, Assignment(), 0.0), views


def test_copy_lags_do_not_change_the_status() -> None:
    result, views = settled()
    behind = [replace(v, lags={0: 5_000, 1: 70, 2: 3, 3: 9}) for v in views]
    assert app_status(MODEL, result, Assignment(), views, PODS, NOW) == app_status(
        MODEL, result, Assignment(), behind, PODS, NOW
    )
    shown = step_patch(app_status(MODEL, result, Assignment(), views, PODS, NOW))
    assert all("lag" not in row for row in shown["members"])


def test_a_report_patches_only_what_it_changed_and_a_repeated_one_nothing() -> None:
    result, views = settled()
    owners = {m: [t for t, a in enumerate(result.assignment.tasks) if a.active == m] for m in (0, 1)}
    members = [digest(report(m, dict.fromkeys(owners[m], 10))) for m in (0, 1)]
    kube = RecordingKube()
    first = app_status(MODEL, result, Assignment(), views, PODS, NOW, members)
    written = StreamApp.from_resource(reconcile._write_status(kube, MODEL, first))  # type: ignore[arg-type]
    sent = {key: value for key, value in step_patch(first).items() if value is not None}
    assert kube.patches == [sent] and "intent" in sent

    members[0] = digest(report(0, dict.fromkeys(owners[0], 3)))
    later = app_status(written, result, Assignment(), views, PODS, NOW, members)
    reconcile._write_status(kube, written, later)  # type: ignore[arg-type]
    assert kube.patches[1] == {"inputLag": 3 * len(owners[0]) + 10 * len(owners[1])}

    again = StreamApp.from_resource({**APP, "status": step_patch(later)})
    reconcile._write_status(kube, again, later)  # type: ignore[arg-type]
    assert len(kube.patches) == 2, "nothing changed: nothing written"


def test_a_rewritten_object_leaves_none_of_its_old_keys_behind() -> None:
    old = {"intent": {"generation": 1, "tasks": [{"task": 0}], "anything": {"a": 1, "b": 2}}}
    new = {"intent": {"generation": 2, "format": 2, "anything": {"a": 1}}}
    patch = status_changes(old, new)
    assert patch == {"intent": {"generation": 2, "format": 2, "tasks": None, "anything": {"a": 1, "b": None}}}


def test_every_status_write_is_conditional_on_the_app_as_read() -> None:
    """The status a reconcile writes, the conditions of a refused spec and of a failing reconcile: each
    patch carries the resourceVersion of the app it was computed from, so a write made from a stale
    view fails (409) instead of putting back what someone else changed."""
    result, views = settled()
    kube = RecordingKube()
    reconcile._write_status(kube, MODEL, app_status(MODEL, result, Assignment(), views, PODS, NOW))  # type: ignore[arg-type]
    reconcile.report_failure(kube, APP, "the API server refused a pod", 0.0)  # type: ignore[arg-type]
    refused = {**APP, "spec": {**APP["spec"], "replicas": -1}}
    reconcile.reconcile(kube, Observed(refused, (), (), {}), 0.0, Metrics())  # type: ignore[arg-type]
    assert kube.events == ["ReconcileFailed", "InvalidSpec"]
    assert kube.versions == ["5", "5", "5"]
