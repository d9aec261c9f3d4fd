"""Level-triggered children: whatever of an app's Service, PodDisruptionBudget or member identities
is deleted or altered by hand is put back by the operator on its own, with no change to the app."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import APP, Operators, create_app

from localcluster.waiting import wait_for
from streamapp.api.names import APPS, GROUP, VERSION


def read(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def test_deleted_or_widened_children_are_repaired(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    core, policy = client.CoreV1Api(api_client), client.PolicyV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=4)

    def everything() -> bool:
        return all(
            read(call, name, namespace) is not None
            for call, name in (
                (core.read_namespaced_service, APP),
                (policy.read_namespaced_pod_disruption_budget, APP),
                (core.read_namespaced_service_account, f"{APP}-1"),
                (rbac.read_namespaced_role, f"{APP}-0"),
                (rbac.read_namespaced_role, f"{APP}-1"),
                (rbac.read_namespaced_role_binding, f"{APP}-1"),
            )
        )

    wait_for(everything, 120, "the app's supporting children")
    original = rbac.read_namespaced_role(f"{APP}-0", namespace).rules
    assert all(rule.resource_names == [f"{APP}-0"] for rule in original)

    core.delete_namespaced_service(APP, namespace)
    policy.delete_namespaced_pod_disruption_budget(APP, namespace)
    rbac.delete_namespaced_role(f"{APP}-1", namespace)
    rbac.delete_namespaced_role_binding(f"{APP}-1", namespace)
    widened = [{**rule.to_dict(), "resource_names": None} for rule in original]
    rbac.patch_namespaced_role(f"{APP}-0", namespace, {"rules": [_camel(r) for r in widened]})

    def repaired() -> bool:
        role = read(rbac.read_namespaced_role, f"{APP}-0", namespace)
        narrow = role is not None and all(rule.resource_names == [f"{APP}-0"] for rule in role.rules)
        return narrow and everything()

    wait_for(repaired, 120, "the children repaired")


def _camel(rule: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiGroups": rule["api_groups"],
        "resources": rule["resources"],
        "verbs": rule["verbs"],
        "resourceNames": rule["resource_names"],
    }


def test_member_accounts_carry_the_specs_workload_identity_annotations(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """IRSA / GKE Workload Identity: set, changed and removed through the app's spec, on every member's
    ServiceAccount; an annotation someone else put there stays."""
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=4)

    def set_annotations(annotations: dict[str, str | None]) -> None:
        body = {"spec": {"executor": {"serviceAccountAnnotations": annotations}}}
        custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP, body)

    def annotations(member: int) -> dict[str, str]:
        found = read(core.read_namespaced_service_account, f"{APP}-{member}", namespace)
        return dict((found.metadata.annotations or {}) if found is not None else {})

    irsa = "eks.amazonaws.com/role-arn"
    gke = "iam.gke.io/gcp-service-account"
    set_annotations({irsa: "arn:aws:iam::1:role/counts"})
    wait_for(
        lambda: all(annotations(m).get(irsa) == "arn:aws:iam::1:role/counts" for m in (0, 1)), 120, "IRSA"
    )
    core.patch_namespaced_service_account(f"{APP}-0", namespace, {"metadata": {"annotations": {"team": "a"}}})
    set_annotations({irsa: None, gke: "counts@project.iam.gserviceaccount.com"})

    def switched() -> bool:
        return all(irsa not in annotations(m) and gke in annotations(m) for m in (0, 1))

    wait_for(switched, 120, "the accounts to follow the spec")
    assert annotations(0)["team"] == "a", "someone else's annotation stays"
