"""A streak of write conflicts shows on the app, naming the object, and clears once writes succeed.

A fault proxy (faultproxy.py) between the operator and the real API server answers every patch of
the app's StreamAppMembers with 409 Conflict, as another writer that always wins would. A changed
`handoffLag` then needs those patches (every member's spec carries the lag thresholds): after `CONFLICTS_BEFORE_REPORT` conflicts in a row the app is Degraded with
reason ReconcileFailed and a Warning Event, both naming the member; once the patches go through
again, the condition is cleared.
"""

from __future__ import annotations

from typing import Any

from faultproxy import FaultProxy
from kubernetes import client
from operator_support import APP, app, patch_app

from localcluster.waiting import wait_for
from streamapp.api.names import GROUP, MEMBERS, VERSION

HANDOFF_LAG = 123


def degraded(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    conditions = (app(api, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Degraded"), {})


def warnings(api: client.ApiClient, namespace: str) -> list[str]:
    events = client.CoreV1Api(api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={APP}"
    )
    return [f"{e.reason}: {e.message}" for e in events.items if e.type == "Warning"]


def thresholds(api: client.ApiClient, namespace: str) -> set[int]:
    """The copy lags every member's spec names (each carries the app's `handoffLag`)."""
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)
    named = [set(m["spec"].get("lagThresholds") or []) for m in listed["items"]]
    return set.intersection(*named) if named else set()


def members(api: client.ApiClient, namespace: str) -> int:
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)
    return len(listed["items"])


def test_a_streak_of_conflicts_is_shown_naming_the_object_and_cleared(
    api_client: client.ApiClient, namespace: str, app_behind_proxy: FaultProxy
) -> None:
    proxy = app_behind_proxy
    wait_for(lambda: members(api_client, namespace) == 2, 90, "two members")
    proxy.conflict("PATCH", MEMBERS)
    patch_app(api_client, namespace, {"spec": {"rebalance": {"handoffLag": HANDOFF_LAG}}})
    named = f"{MEMBERS} {APP}-"
    wait_for(
        lambda: any(named in w for w in warnings(api_client, namespace)),
        120,
        "a Warning Event naming the member whose writes conflict",
    )
    wait_for(lambda: named in degraded(api_client, namespace).get("message", ""), 60, "Degraded naming it")
    proxy.conflict("PATCH", MEMBERS, on=False)
    wait_for(
        lambda: named not in degraded(api_client, namespace).get("message", ""),
        120,
        "the condition cleared once the writes go through",
    )
    wait_for(lambda: HANDOFF_LAG in thresholds(api_client, namespace), 60, "every member rewritten")
