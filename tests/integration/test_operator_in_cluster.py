"""The operator as users run it: installed with `kubectl apply -k`, running as pods with only its
ServiceAccount — no admin kubeconfig anywhere.

The install is the shipped kustomization placed on the process node (`e2e/local-install/`), narrowed
by one more overlay to this test's namespace: the operator pods run there as real `streamapp
operator` processes whose only credential is their pod-bound ServiceAccount token, and so they can
do exactly what the shipped ClusterRole and lease Role allow.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import app, create_app, scale

from cluster_tools import kubectl
from localcluster.waiting import wait_for
from streamapp.api.names import MEMBERS
from streamapp.render.manifests import LABELS, NAME

ROOT = Path(__file__).resolve().parents[2]
LOCAL_INSTALL = ROOT / "e2e" / "local-install"
OPERATOR_SELECTOR = f"app.kubernetes.io/name={LABELS['app.kubernetes.io/name']}"
CLUSTER_KINDS = (
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)


def overlay(directory: Path, namespace: str) -> Path:
    """The local install, put into `namespace` and watching only it."""
    directory.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": namespace,
        "resources": [os.path.relpath(LOCAL_INSTALL, directory)],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": NAME},
                "patch": yaml.safe_dump(
                    [
                        {
                            "op": "replace",
                            "path": "/spec/template/spec/containers/0/command/2",
                            "value": "--namespace",
                        },
                        {
                            "op": "add",
                            "path": "/spec/template/spec/containers/0/command/3",
                            "value": namespace,
                        },
                    ]
                ),
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


@pytest.fixture
def installed(
    kubeconfig_path: Path,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
    crds: None,
    process_node: str,
) -> Iterator[list[dict[str, Any]]]:
    """Apply the install; yield the objects it created; remove the cluster-scoped ones afterwards."""
    path = overlay(tmp_path / "install", namespace)
    objects = list(yaml.safe_load_all(kubectl(kubeconfig_path, "kustomize", str(path))))
    # The README's CRD upgrade commands, as written: kustomize's and the chart's.
    kubectl(kubeconfig_path, "apply", "--server-side", "-k", str(ROOT / "crds"))
    kubectl(
        kubeconfig_path, "apply", "--server-side", "-f", str(ROOT / "charts" / "streamapp-operator" / "crds")
    )
    kubectl(kubeconfig_path, "apply", "--server-side", "-k", str(path))
    try:
        yield objects
    finally:
        try:
            client.AppsV1Api(api_client).delete_namespaced_deployment(NAME, namespace)
        except ApiException as error:
            if error.status != 404:
                raise
        # Every cluster-scoped object the install made but the CRDs (other tests use them): its
        # ClusterRole and binding, and its admission policies, which would otherwise go on refusing
        # the apps of every later test in the session.
        for kind, name in sorted(
            (o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in CLUSTER_KINDS
        ):
            kubectl(kubeconfig_path, "delete", "--ignore-not-found", "--wait", kind, name)


def ready_operator_pods(api: client.ApiClient, namespace: str) -> list[client.V1Pod]:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=OPERATOR_SELECTOR).items
    return [
        p
        for p in pods
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def lease(api: client.ApiClient, namespace: str) -> client.V1Lease | None:
    try:
        return client.CoordinationV1Api(api).read_namespaced_lease(NAME, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def members(api: client.ApiClient, namespace: str) -> set[int]:
    found = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "streamapp.dev", "v1alpha1", namespace, MEMBERS
    )
    return {int(m["spec"]["memberId"]) for m in found["items"]}


def reconciled(api: client.ApiClient, namespace: str, replicas: int) -> bool:
    """The operator acted: a member per replica, status with the intent and the member count. (Its
    members run on kwok nodes with no executor, so the app is not Ready: nothing confirms processing.)"""
    status = app(api, namespace).get("status") or {}
    ready = {c["type"]: c for c in status.get("conditions") or []}.get("Ready") or {}
    return (
        members(api, namespace) == set(range(replicas))
        and status.get("replicas") == replicas
        and bool(status.get("intent"))
        and ready.get("reason") == "TasksNotConfirmed"
    )


def test_operator_installed_by_kustomize_runs_in_cluster_with_only_its_service_account(
    api_client: client.ApiClient, namespace: str, installed: list[dict[str, Any]]
) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in installed}
    assert ("ClusterRole", NAME) in kinds and ("Role", f"{NAME}-leader-election") in kinds

    wait_for(lambda: len(ready_operator_pods(api_client, namespace)) == 2, 120, "two operator pods Ready")
    pods = ready_operator_pods(api_client, namespace)
    assert {p.spec.service_account_name for p in pods} == {NAME}
    assert {p.spec.node_name for p in pods} == {"process-0"}
    names = {p.metadata.name for p in pods}
    holder = wait_for(
        lambda: (held := lease(api_client, namespace)) and held.spec.holder_identity in names and held,
        60,
        "one operator pod holding the lease",
    )

    create_app(api_client, namespace, replicas=2, partitions=4)
    wait_for(
        lambda: reconciled(api_client, namespace, 2), 120, "the app reconciled by the in-cluster operator"
    )

    # A graceful stop (what a rollout sends) hands leadership over at once: the successor takes the
    # Lease before the old holder's lease would have expired, which only a release makes possible.
    leader = holder.spec.holder_identity
    current = lease(api_client, namespace)
    assert current is not None and current.spec.holder_identity == leader
    expires = current.spec.renew_time.timestamp() + current.spec.lease_duration_seconds
    client.CoreV1Api(api_client).delete_namespaced_pod(leader, namespace)

    def taken_over() -> client.V1Lease | None:
        held = lease(api_client, namespace)
        if held and held.spec.holder_identity not in (None, "", leader):
            return held
        return None

    successor = wait_for(taken_over, 120, "another operator pod taking the lease")
    assert successor.spec.acquire_time.timestamp() < expires + 1, "the lease was not released"

    scale(api_client, namespace, 3)
    wait_for(lambda: reconciled(api_client, namespace, 3), 120, "the new leader acting on a scale")
