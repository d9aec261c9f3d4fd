"""The Argo CD health check (manifests/argocd/health.lua) on statuses the operator really writes.

Argo CD runs resource health scripts in gopher-lua (Lua 5.1 semantics); lupa's Lua 5.1 runs the same
file here on StreamApps whose status comes from `controller/status.py`'s pure functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa.lua51 import LuaRuntime
from reports import digests, processing_members

from appbody import app_body
from streamapp.api.streamapp import StreamApp
from streamapp.controller.observe import PodState
from streamapp.controller.status import app_status, invalid_spec_status, step_patch
from streamapp.rebalance import AppConfig, Assignment, MemberView, Plan, plan

ARGOCD = Path(__file__).resolve().parents[2] / "manifests" / "argocd"
HEALTH_KEY = "resource.customizations.health.streamapp.dev_StreamApp"
NOW = "2026-01-01T00:00:00Z"


def health(app: dict[str, Any]) -> tuple[str, str]:
    """(status, message) as Argo CD would compute them for this object."""
    lua = LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(app, recursive=True)
    result = lua.execute((ARGOCD / "health.lua").read_text())
    return str(result["status"]), str(result["message"])


def app(generation: int = 1, replicas: int = 2, status: dict[str, Any] | None = None) -> dict[str, Any]:
    body = app_body(generation=generation, replicas=replicas, partitions=4)
    if status is not None:
        body["status"] = status
    return body


def observed(
    body: dict[str, Any], views: list[MemberView], previous: Assignment
) -> tuple[dict[str, Any], Plan]:
    """The app after one reconcile that saw `views` (alive members have a ready pod)."""
    replicas = body["spec"]["replicas"]
    result = plan(AppConfig(4, replicas), views, previous, 0.0)
    pods = {v.id: PodState(v.id, f"counts-{v.id}", f"uid-{v.id}", v.alive, False, None) for v in views}
    members = processing_members(result.assignment, {m: p for m, p in pods.items() if p.ready})
    parsed = StreamApp.from_resource(body)
    status = {
        **(body.get("status") or {}),
        **step_patch(app_status(parsed, result, previous, views, pods, NOW, digests(members))),
    }
    return {**body, "status": status}, result


def steady() -> tuple[dict[str, Any], Assignment]:
    body, result = observed(app(), [MemberView(0), MemberView(1)], Assignment())
    assert not result.assignment.in_flight()
    return body, result.assignment


def test_the_configmap_carries_the_script_verbatim() -> None:
    config_map = yaml.safe_load((ARGOCD / "argocd-cm.yaml").read_text())
    assert config_map["data"][HEALTH_KEY] == (ARGOCD / "health.lua").read_text()


def test_an_app_the_operator_has_not_seen_is_progressing() -> None:
    assert health(app())[0] == "Progressing"


def test_starting_members_are_progressing_not_degraded() -> None:
    body, _ = observed(app(), [MemberView(0, alive=False), MemberView(1, alive=False)], Assignment())
    assert health(body)[0] == "Progressing"


def test_all_tasks_processed_and_no_handoff_is_healthy() -> None:
    body, _ = steady()
    status, message = health(body)
    assert status == "Healthy" and "4 tasks active on 2/2" in message


def test_a_spec_change_not_yet_observed_is_progressing() -> None:
    body, _ = steady()
    body["metadata"]["generation"] = 2
    status, message = health(body)
    assert status == "Progressing" and "generation 2" in message


def test_scale_out_is_progressing_while_warmups_catch_up() -> None:
    body, assignment = steady()
    body = {**body, "spec": {**body["spec"], "replicas": 3}}
    scaled, result = observed(body, [MemberView(0), MemberView(1), MemberView(2)], assignment)
    assert result.assignment.in_flight()
    status, message = health(scaled)
    assert status == "Progressing" and message.startswith("Rebalancing")


def test_tasks_held_for_a_lost_member_are_degraded() -> None:
    body, assignment = steady()
    lost, _ = observed(body, [MemberView(0), MemberView(1, alive=False)], assignment)
    status, message = health(lost)
    assert status == "Degraded" and "not processed" in message


@pytest.mark.parametrize("bumped", [False, True])
def test_a_refused_spec_is_degraded_until_a_new_one_is_observed(bumped: bool) -> None:
    body, _ = steady()
    parsed, error = StreamApp.from_resource(body), "spec.partitions: must be >= 1"
    refused = {
        **body,
        "status": {
            **body["status"],
            **invalid_spec_status(parsed.metadata, parsed.status.conditions, error, NOW),
        },
    }
    if bumped:
        refused["metadata"] = {**refused["metadata"], "generation": 2}
    status, message = health(refused)
    assert (status, "partitions" in message) == (("Progressing", False) if bumped else ("Degraded", True))
