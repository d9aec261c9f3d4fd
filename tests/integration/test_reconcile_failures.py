"""Refusals are never silent: the API server refusing a member's claim shows as Degraded/PodRefused
with the server's message and a Warning Event, and clears once the cause goes; a damaged intent is
rebuilt."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from operator_support import APP, Operators, app, create_app, reasons, scale

from localcluster.waiting import wait_for
from streamapp.controller.intentrebuild import read_intent


def degraded(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    conditions = (app(api, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Degraded"), {})


def test_a_refused_claim_is_reported_and_the_app_recovers(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_limit_range(
        namespace,
        {
            "metadata": {"name": "small-claims"},
            "spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}}]},
        },
    )
    create_app(api_client, namespace, replicas=1, partitions=2)
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        "streamapp.dev",
        "v1alpha1",
        namespace,
        "streamapps",
        APP,
        {"spec": {"executor": {"storage": {"size": "5Gi"}}}},
    )
    operators.start()

    def reported() -> dict[str, Any] | None:
        found = degraded(api_client, namespace)
        return found if found.get("reason") == "PodRefused" else None

    condition = wait_for(reported, 120, "Degraded with reason PodRefused")
    assert condition["status"] == "True"
    message = condition["message"]
    assert "member 0's PersistentVolumeClaim: 403" in message and "storage" in message, message
    assert "PodRefused" in reasons(api_client, namespace)

    core.delete_namespaced_limit_range("small-claims", namespace)
    wait_for(
        lambda: degraded(api_client, namespace).get("reason") not in (None, "PodRefused"),
        120,
        "the failure cleared once the claim is accepted",
    )

    def claim_created() -> bool:
        names = [c.metadata.name for c in core.list_namespaced_persistent_volume_claim(namespace).items]
        return f"{APP}-state-0" in names

    wait_for(claim_created, 60, "the member's claim created")


def test_a_damaged_intent_is_rebuilt_from_the_members_and_later_scales_apply(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    objects = client.CustomObjectsApi(api_client)
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=4)
    wait_for(lambda: (app(api_client, namespace).get("status") or {}).get("intent"), 120, "an intent")

    objects.patch_namespaced_custom_object_status(
        "streamapp.dev",
        "v1alpha1",
        namespace,
        "streamapps",
        APP,
        {"status": {"intent": {"tasks": "garbage"}}},
    )
    wait_for(lambda: "IntentRebuilt" in reasons(api_client, namespace), 120, "an IntentRebuilt event")
    scale(api_client, namespace, 3)

    def rebuilt_and_scaled() -> bool:
        body = app(api_client, namespace)
        try:
            readable = len(read_intent((body.get("status") or {}).get("intent"), 4).tasks) == 4
        except ValueError:
            return False
        return readable and (body.get("status") or {}).get("replicas") == 3

    wait_for(rebuilt_and_scaled, 120, "a readable intent again and the scale applied")
