"""RBAC: the executors get only what they need, and the operator holds everything it grants them."""

from __future__ import annotations

from streamapp.controller.permissions import (
    executor_role_rules,
    operator_cluster_role_rules,
    operator_lease_rules,
    spark_driver_rules,
)
from streamapp.render.manifests import NAME, NAMESPACE, OPERATOR_REPLICAS, manifest_files, rbac
from streamapp.render.rbac import covers


def _verbs(group: str, resource: str) -> set[str]:
    return {
        verb
        for rule in executor_role_rules("counts-1")
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_executor_reads_its_member_and_writes_only_its_status() -> None:
    assert _verbs("streamapp.dev", "streamappmembers") == {"get", "list", "watch"}
    assert _verbs("streamapp.dev", "streamappmembers/status") == {"get", "patch"}
    assert _verbs("", "pods") == {"get"}
    assert _verbs("streamapp.dev", "streamapps") == set()
    assert all(rule["resourceNames"] == ["counts-1"] for rule in executor_role_rules("counts-1"))


def test_a_spark_driver_member_may_run_executor_pods_and_others_may_not() -> None:
    plain = executor_role_rules("counts-1")
    driver = executor_role_rules("counts-1", spark_driver=True)
    assert driver == plain + spark_driver_rules()
    wanted = {
        "apiGroups": [""],
        "resources": ["pods", "services", "configmaps"],
        "verbs": ["create", "delete"],
    }
    assert covers(driver, wanted) and not covers(plain, wanted)


def test_operator_holds_every_permission_it_grants_so_it_needs_no_escalate() -> None:
    operator = operator_cluster_role_rules()
    assert all(covers(operator, rule) for rule in executor_role_rules("counts-1", spark_driver=True))
    verbs = {verb for rule in operator for verb in rule["verbs"]}
    assert not verbs & {"escalate", "bind", "impersonate", "*"}
    assert all("*" not in rule["resources"] and "*" not in rule["apiGroups"] for rule in operator)


def test_operator_can_manage_its_children_and_elect_a_leader() -> None:
    operator = operator_cluster_role_rules()
    wanted = [
        ("streamapp.dev", "streamapps/status", "patch"),
        ("streamapp.dev", "streamappmembers", "create"),
        ("", "pods", "delete"),
        ("", "persistentvolumeclaims", "create"),
        ("", "services", "create"),
        ("", "serviceaccounts", "create"),
        ("", "serviceaccounts", "patch"),
        ("policy", "poddisruptionbudgets", "create"),
        ("rbac.authorization.k8s.io", "roles", "create"),
        ("rbac.authorization.k8s.io", "rolebindings", "create"),
        ("", "events", "create"),
    ]
    for group, resource, verb in wanted:
        assert covers(operator, {"apiGroups": [group], "resources": [resource], "verbs": [verb]}), (
            resource,
            verb,
        )


def test_operator_uses_no_update_rights_scale_only_to_patch_and_no_cluster_wide_leases() -> None:
    operator = operator_cluster_role_rules()
    updates = [rule for rule in operator if "update" in rule["verbs"]]
    # The one update: the apps' finalizers, what blockOwnerDeletion on its children requires
    # (OwnerReferencesPermissionEnforcement); it grants no write to the app itself.
    assert updates == [
        {"apiGroups": ["streamapp.dev"], "resources": ["streamapps/finalizers"], "verbs": ["update"]}
    ]
    # /scale only to patch: spec.autoscaling sets replicas as an HPA would, nothing else of the spec.
    scale = [rule for rule in operator if any(r.endswith("/scale") for r in rule["resources"])]
    assert scale == [{"apiGroups": ["streamapp.dev"], "resources": ["streamapps/scale"], "verbs": ["patch"]}]
    assert not any(r == "leases" for rule in operator for r in rule["resources"])
    assert operator_lease_rules() == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]


def test_bindings_name_the_operator_account() -> None:
    account, role, binding, lease_role, lease_binding, *_ = rbac()
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == account["metadata"]["name"] == NAME
    assert lease_binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": lease_role["metadata"]["name"],
    }
    assert lease_role["metadata"]["namespace"] == NAMESPACE
    for bound in (binding, lease_binding):
        assert bound["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]


def test_kustomization_installs_crds_rbac_and_two_operator_replicas() -> None:
    files = manifest_files()
    assert "- ../crds" in files["kustomization.yaml"]
    assert f"namespace: {NAMESPACE}" in files["kustomization.yaml"]
    assert f"replicas: {OPERATOR_REPLICAS}" in files["operator.yaml"] and OPERATOR_REPLICAS == 2
    assert "containerPort: 8080" in files["operator.yaml"]
