"""What a pod template can make the running operator do, on the real API server: nulls posted as raw JSON
keep the operator's restricted defaults in the member pod it creates, and a template that mounts another
app's or member's claim gets no pod (Degraded with reason ClaimRefused and a Warning Event naming the
field) while one mounting a claim nobody owns runs, and template labels that another app's Service selects
on get no pod either (ServiceJoinRefused)."""

from __future__ import annotations

from typing import Any

import rawjson
from api_samples import app_body
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import Operators

from localcluster.waiting import wait_for
from streamapp.api.names import APP_LABEL, APPS, GROUP, VERSION

TIMEOUT_S = 120.0
VOLUMES = "spec.executor.podTemplate.spec.volumes"


def base(name: str, replicas: int = 1, template: dict[str, Any] | None = None) -> dict[str, Any]:
    executor: dict[str, Any] = {"image": "streamapp/executor:dev"}
    if template is not None:
        executor["podTemplate"] = template
    return app_body(
        name,
        namespace=None,
        uid=None,
        replicas=replicas,
        partitions=2,
        state_store="file:///var/lib/streamapp",
        executor=executor,
    )


def pod(core: client.CoreV1Api, namespace: str, name: str) -> client.V1Pod | None:
    try:
        return core.read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def degraded(objects: client.CustomObjectsApi, namespace: str, name: str, reason: str) -> str | None:
    status = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, name).get("status") or {}
    found = next((c for c in status.get("conditions") or [] if c["type"] == "Degraded"), None)
    if found and found["status"] == "True" and found["reason"] == reason:
        return str(found["message"])
    return None


def warnings(core: client.CoreV1Api, namespace: str, name: str, reason: str) -> list[str]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.message for e in events if e.reason == reason and e.type == "Warning"] or []


def test_nulls_posted_raw_keep_the_operators_defaults(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    core = client.CoreV1Api(api_client)
    template = {
        "spec": {
            "securityContext": {"runAsNonRoot": None, "seccompProfile": None},
            "containers": [
                {"name": "executor", "securityContext": {"allowPrivilegeEscalation": None}},
                {"name": "side", "image": "busybox", "securityContext": {"allowPrivilegeEscalation": None}},
            ],
            "initContainers": [
                {"name": "init", "image": "busybox", "securityContext": {"allowPrivilegeEscalation": None}}
            ],
        }
    }
    assert rawjson.create_app(api_client, namespace, base("nulls", template=template)) is None
    stored = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, "nulls"
    )
    kept = stored["spec"]["executor"]["podTemplate"]["spec"]["securityContext"]
    assert kept == {"runAsNonRoot": None, "seccompProfile": None}, "the API server kept the nulls"

    operators.start()
    created = wait_for(lambda: pod(core, namespace, "nulls-0"), TIMEOUT_S, "the member pod")
    spec = created.spec
    assert spec.security_context.run_as_non_root is True
    assert spec.security_context.seccomp_profile.type == "RuntimeDefault"
    for container in [*spec.containers, *spec.init_containers]:
        assert container.security_context.allow_privilege_escalation is False, container.name
        assert container.security_context.capabilities.drop == ["ALL"], container.name


def test_a_template_mounts_no_claim_of_another_app_or_member(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    objects, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    owner = base("owner")
    owner["spec"]["executor"]["storage"] = {"size": "1Gi"}
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, owner)
    core.create_namespaced_persistent_volume_claim(
        namespace,
        {
            "metadata": {"name": "shared"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    operators.start()
    wait_for(lambda: pod(core, namespace, "owner-0"), TIMEOUT_S, "the owner's member pod")

    def mounting(name: str, claim: str) -> dict[str, Any]:
        volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        return base(name, template={"spec": {"volumes": volumes}})

    refused = {
        "thief": "owner-state-0",  # another app's member state
        "ghost": "later-state-0",  # not yet created, named as a member's state claim
    }
    for name, claim in refused.items():
        objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, mounting(name, claim))
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, mounting("sharer", "shared"))
    # An app mounting its own member's state in every member's pod.
    own = mounting("self", "self-state-1")
    own["spec"]["replicas"] = 2
    own["spec"]["executor"]["storage"] = {"size": "1Gi"}
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, own)
    refused["self"] = "self-state-1"

    field = f"{VOLUMES}[0].persistentVolumeClaim.claimName"
    for name, claim in refused.items():
        message = wait_for(
            lambda name=name: degraded(objects, namespace, name, "ClaimRefused"), TIMEOUT_S, f"{name} refused"
        )
        assert field in message and claim in message, message
        events = wait_for(
            lambda name=name: warnings(core, namespace, name, "ClaimRefused"), TIMEOUT_S, f"{name}'s Event"
        )
        assert any(field in e and claim in e for e in events), events
    wait_for(lambda: pod(core, namespace, "sharer-0"), TIMEOUT_S, "the pod mounting a claim nobody owns")
    for name in refused:
        pods = core.list_namespaced_pod(namespace, label_selector=f"{APP_LABEL}={name}").items
        assert pods == [], (name, [p.metadata.name for p in pods])


def test_template_labels_put_no_member_pod_behind_another_apps_service(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """Another team's Service `payments` selects `app: payments`: an app whose template sets that label
    gets no pod (Degraded with reason ServiceJoinRefused and a Warning Event naming the Service), while
    an app whose template label is selected only by a Service naming that app runs with it."""
    objects, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    port = [{"port": 80, "targetPort": 8080}]
    core.create_namespaced_service(
        namespace,
        {"metadata": {"name": "payments"}, "spec": {"selector": {"app": "payments"}, "ports": port}},
    )
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "friend-api"},
            "spec": {"selector": {"team": "data", APP_LABEL: "friend"}, "ports": port},
        },
    )
    objects.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        APPS,
        base("intruder", template={"metadata": {"labels": {"app": "payments"}}}),
    )
    objects.create_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, base("friend", template={"metadata": {"labels": {"team": "data"}}})
    )
    operators.start()
    message = wait_for(
        lambda: degraded(objects, namespace, "intruder", "ServiceJoinRefused"), TIMEOUT_S, "intruder refused"
    )
    assert "Service payments" in message and "app=payments" in message, message
    events = wait_for(
        lambda: warnings(core, namespace, "intruder", "ServiceJoinRefused"), TIMEOUT_S, "the intruder's Event"
    )
    assert any("Service payments" in e for e in events), events
    friend = wait_for(lambda: pod(core, namespace, "friend-0"), TIMEOUT_S, "the friend's member pod")
    assert friend.metadata.labels["team"] == "data"
    assert core.list_namespaced_pod(namespace, label_selector="app=payments").items == []
