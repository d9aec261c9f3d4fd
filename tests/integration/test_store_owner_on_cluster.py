"""A state store root another app owns, on the real API server with a real executor: the member's
executor refuses it before writing anything, and the app's Degraded condition names the owner.

The owner is a second app of the namespace whose executors claimed the root first (its `owner.json`,
written here as its executor writes it, so that only one app's executor has to start)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client
from operator_support import APP, Operators, app

from localcluster.waiting import wait_for
from realapps import app_on_process_node
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog


def degraded(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    conditions = (app(api, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Degraded"), {})


def test_an_app_on_a_root_another_app_owns_is_degraded_naming_the_owner(
    api_client: client.ApiClient, namespace: str, operators: Operators, process_node: str, tmp_path: Path
) -> None:
    generate(FileLog(tmp_path / "input"), GenerateSpec(partitions=2, count=100, keys=10, seed=1))
    root = tmp_path / "state"
    root.mkdir()
    (root / "owner.json").write_text(json.dumps({"namespace": namespace, "app": "first"}))
    operators.start()
    body = app_on_process_node(APP, tmp_path, 2, replicas=1)
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)

    wait_for(
        lambda: degraded(api_client, namespace).get("reason") == "ExecutorSetupFailed",
        180,
        "Degraded=ExecutorSetupFailed for the root of another app",
    )
    message = degraded(api_client, namespace)["message"]
    assert f"belongs to app {namespace}/first" in message, message
    assert f"app {namespace}/{APP} refuses it" in message, message
    assert sorted(p.name for p in root.iterdir()) == ["owner.json"]
