"""The Helm chart on the real control plane: install (from the archive `make dist` packages), reconcile,
upgrade, uninstall.

The operator runs as pods of the chart's Deployment on the process node, with nothing but its
ServiceAccount (the process node hands each pod a kubeconfig holding only its token): this checks the
chart's RBAC for real. App members land on kwok nodes (Ready without running anything), which is enough
for the operator to reconcile the app.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from operator_support import APP, app, create_app, scale

import dist
from localcluster.nodes import process_node_selector, process_node_tolerations
from localcluster.waiting import wait_for
from streamapp.api.names import GROUP, MEMBERS, VERSION

CHART = Path(__file__).resolve().parents[2] / "charts" / "streamapp-operator"
RELEASE = "sa"
FULLNAME = "sa-streamapp-operator"
INSTANCE = f"app.kubernetes.io/instance={RELEASE}"
HELM_TIMEOUT = "240s"


@pytest.fixture
def release_namespace(api_client: client.ApiClient) -> Iterator[str]:
    """Where the operator is installed; separate from the namespace it watches."""
    core = client.CoreV1Api(api_client)
    name = f"t-helm-release-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"streamapp.dev/test": "true"}}})
    try:
        yield name
    finally:
        core.delete_namespace(name)


def run_helm(helm: list[str], kubeconfig: Path, *args: str) -> str:
    result = subprocess.run(
        [*helm, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"helm {args[0]} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def deploy(
    helm: list[str],
    kubeconfig: Path,
    action: str,
    namespace: str,
    values: dict[str, Any],
    tmp: Path,
    chart: Path = CHART,
) -> None:
    path = tmp / f"{action}-values.yaml"
    path.write_text(yaml.safe_dump(values))
    run_helm(
        helm, kubeconfig, action, RELEASE, str(chart), "-n", namespace, "-f", str(path),
        "--wait", "--timeout", HELM_TIMEOUT,
    )  # fmt: skip


def members(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    found = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)
    return list(found["items"])


def reconciled(api: client.ApiClient, namespace: str, replicas: int) -> bool:
    """The operator wrote the intent and conditions and one StreamAppMember per replica."""
    status = app(api, namespace).get("status") or {}
    ids = sorted(m["spec"]["memberId"] for m in members(api, namespace))
    return bool(status.get("intent")) and bool(status.get("conditions")) and ids == list(range(replicas))


def release_objects(api: client.ApiClient, namespaces: list[str]) -> list[str]:
    """Every object the chart labels for this release that is still there."""
    apps, core, rbac = client.AppsV1Api(api), client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    flows = client.FlowcontrolApiserverV1Api(api).list_flow_schema(label_selector=INSTANCE).items
    found = (
        [f"FlowSchema/{o.metadata.name}" for o in flows]
        + [f"ClusterRole/{o.metadata.name}" for o in rbac.list_cluster_role(label_selector=INSTANCE).items]
        + [
            f"ClusterRoleBinding/{o.metadata.name}"
            for o in rbac.list_cluster_role_binding(label_selector=INSTANCE).items
        ]
    )
    for namespace in namespaces:
        listings = {
            "Deployment": apps.list_namespaced_deployment,
            "ServiceAccount": core.list_namespaced_service_account,
            "Service": core.list_namespaced_service,
            "Role": rbac.list_namespaced_role,
            "RoleBinding": rbac.list_namespaced_role_binding,
        }
        for kind, listing in listings.items():
            items = listing(namespace, label_selector=INSTANCE).items
            found += [f"{kind}/{namespace}/{o.metadata.name}" for o in items]
    return found


def flow_schema_uid(api: client.ApiClient, user: str, namespace: str) -> str | None:
    """UID of the FlowSchema the API server put a request of `user` (impersonated) under, from the
    header it answers with (a request refused by RBAC is classified too)."""
    with client.ApiClient(api.configuration, "Impersonate-User", user) as as_user:
        custom = client.CustomObjectsApi(as_user)
        try:
            answer = custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, MEMBERS, _preload_content=False
            )
            found = answer.headers.get("X-Kubernetes-PF-FlowSchema-UID")
        except client.exceptions.ApiException as refused:
            found = (refused.headers or {}).get("X-Kubernetes-PF-FlowSchema-UID")
    return str(found) if found else None


def operator_pods(api: client.ApiClient, namespace: str) -> list[Any]:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=INSTANCE).items
    return [p for p in pods if p.metadata.deletion_timestamp is None and "crd" not in p.metadata.name]


def show_operator_logs(api: client.ApiClient, namespace: str) -> None:
    """Log tails of the operator pods, for a failing test's report."""
    core = client.CoreV1Api(api)
    for pod in core.list_namespaced_pod(namespace).items:
        try:
            text = core.read_namespaced_pod_log(pod.metadata.name, namespace, tail_lines=40)
        except client.exceptions.ApiException as error:
            text = f"(no log: {error.reason})"
        sys.stderr.write(f"--- {pod.metadata.name} log tail ---\n{text}\n")


def allowed(api: client.ApiClient, user: str, verb: str, resource: str, namespace: str) -> bool:
    """Whether the API server lets `user` do `verb` on `resource` (a SubjectAccessReview)."""
    review = client.AuthorizationV1Api(api).create_subject_access_review(
        {
            "spec": {
                "user": user,
                "resourceAttributes": {
                    "group": "streamapp.dev",
                    "resource": resource,
                    "verb": verb,
                    "namespace": namespace,
                },
            }
        }
    )
    return bool(review.status.allowed)


def test_install_upgrade_uninstall(
    api_client: client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    release_namespace: str,
    process_node: str,
    crds: None,
    helm: list[str],
    tmp_path: Path,
) -> None:
    values: dict[str, Any] = {
        "watchNamespaces": [namespace],
        "nodeSelector": process_node_selector(),
        "tolerations": process_node_tolerations(),
        "flowControl": {"enabled": True},  # opt-in; the test checks the API server classifies by it
    }
    installed = False
    # Installed as a release is: from the archive `make dist` packages; upgraded from the sources.
    archive = dist.package_chart(tmp_path / "dist")
    try:
        deploy(helm, kubeconfig_path, "install", release_namespace, values, tmp_path, archive)
        installed = True
        pods = operator_pods(api_client, release_namespace)
        assert len(pods) == 2
        assert {p.spec.node_name for p in pods} == {process_node}
        assert {p.spec.service_account_name for p in pods} == {FULLNAME}

        # One replica leads through the Lease its Role allows, and reconciles the app.
        def holder() -> str | None:
            leases = client.CoordinationV1Api(api_client).list_namespaced_lease(release_namespace).items
            return next((lease.spec.holder_identity for lease in leases), None)

        # The operator's requests queue under the release's FlowSchema, not with the executors'.
        flow = client.FlowcontrolApiserverV1Api(api_client).read_flow_schema(
            f"{release_namespace}-{FULLNAME}"
        )
        operator_user = f"system:serviceaccount:{release_namespace}:{FULLNAME}"
        wait_for(
            lambda: flow_schema_uid(api_client, operator_user, namespace) == flow.metadata.uid,
            60,
            "the API server to classify the operator's requests by the release's FlowSchema",
        )
        executor_user = f"system:serviceaccount:{namespace}:{APP}-0"
        assert flow_schema_uid(api_client, executor_user, namespace) not in (None, flow.metadata.uid)

        budget = client.PolicyV1Api(api_client).read_namespaced_pod_disruption_budget(
            FULLNAME, release_namespace
        )
        assert budget.spec.max_unavailable == 1
        # Users bound to the built-in roles get StreamApps through the chart's aggregated ClusterRoles.
        for role in ("view", "edit"):
            client.RbacAuthorizationV1Api(api_client).create_namespaced_role_binding(
                namespace,
                {
                    "metadata": {"name": f"{role}-user"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [
                        {"kind": "User", "name": f"{role}-user", "apiGroup": "rbac.authorization.k8s.io"}
                    ],
                },
            )
        wait_for(
            lambda: allowed(api_client, "view-user", "list", "streamapps", namespace), 60, "view aggregated"
        )
        wait_for(
            lambda: allowed(api_client, "edit-user", "create", "streamapps", namespace), 60, "edit aggregated"
        )
        assert not allowed(api_client, "view-user", "patch", "streamapps", namespace)
        assert not allowed(api_client, "edit-user", "patch", "streamappmembers", namespace)

        leader = wait_for(holder, 120, "an operator pod holding the Lease")
        assert leader in {p.metadata.name for p in pods}
        create_app(api_client, namespace, replicas=2, partitions=4)
        wait_for(lambda: reconciled(api_client, namespace, 2), 120, "StreamAppMembers, intent, conditions")

        # Upgrade: one replica, an extra label, the CRD hook Job (it applies CRDs as its own SA).
        upgraded = {
            **values,
            "replicaCount": 1,
            "podLabels": {"streamapp.dev/upgraded": "yes"},
            "crds": {"upgradeJob": {"enabled": True}},
        }
        deploy(helm, kubeconfig_path, "upgrade", release_namespace, upgraded, tmp_path)
        deployment = client.AppsV1Api(api_client).read_namespaced_deployment(FULLNAME, release_namespace)
        assert deployment.spec.replicas == 1
        assert deployment.spec.template.metadata.labels["streamapp.dev/upgraded"] == "yes"
        wait_for(lambda: len(operator_pods(api_client, release_namespace)) == 1, 120, "one operator pod")
        extensions = client.ApiextensionsV1Api(api_client)
        for crd in ("streamapps.streamapp.dev", "streamappmembers.streamapp.dev"):
            managers = {
                f.manager for f in extensions.read_custom_resource_definition(crd).metadata.managed_fields
            }
            assert "streamapp" in managers, f"the CRD Job did not apply {crd}: {managers}"
        assert not client.BatchV1Api(api_client).list_namespaced_job(release_namespace).items  # deleted
        scale(api_client, namespace, 3)
        wait_for(lambda: reconciled(api_client, namespace, 3), 120, "the upgraded operator scaling to 3")

        run_helm(helm, kubeconfig_path, "uninstall", RELEASE, "-n", release_namespace, "--wait")
        installed = False
        assert release_objects(api_client, [release_namespace, namespace]) == []
        wait_for(lambda: not operator_pods(api_client, release_namespace), 60, "operator pods gone")
        assert app(api_client, namespace)["metadata"]["name"] == APP  # the user's app stays
        names = {c.metadata.name for c in extensions.list_custom_resource_definition().items}
        assert {"streamapps.streamapp.dev", "streamappmembers.streamapp.dev"} <= names
    except BaseException:
        show_operator_logs(api_client, release_namespace)
        raise
    finally:
        if installed:
            subprocess.run(
                [*helm, "--kubeconfig", str(kubeconfig_path), "uninstall", RELEASE, "-n", release_namespace],
                capture_output=True,
                timeout=120,
            )
