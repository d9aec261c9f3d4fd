"""The app's PodDisruptionBudget really stops a second voluntary disruption.

The operator gives every app a PDB with ``maxUnavailable: 1``. Member pods are owned by the StreamApp,
not by a workload kube-controller-manager knows, so the disruption controller reads the expected pod
count from the app's /scale subresource through its discovery-backed RESTMapper. The app (and thus its
CRD) is created right before the PDB is evaluated; this is the case that once logged
``CalculateExpectedPodCountFailed ... no matches for kind "StreamApp"``. Pods run on kwok nodes, where
they are Ready without running anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import APP, Operators, create_app

from localcluster.waiting import wait_for

REPLICAS = 3
BUDGET_TIMEOUT_S = 120.0


def evict(core: client.CoreV1Api, namespace: str, pod: str) -> None:
    body = {"metadata": {"name": pod, "namespace": namespace}}
    core.create_namespaced_pod_eviction(pod, namespace, client.V1Eviction.model_validate(body))


def budget_status(policy: client.PolicyV1Api, namespace: str) -> Any:
    """The PDB's status once the operator created it (None before)."""
    try:
        return policy.read_namespaced_pod_disruption_budget(APP, namespace).status
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def test_an_eviction_beyond_the_budget_is_refused(
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    kubeconfig_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    core, policy = client.CoreV1Api(api_client), client.PolicyV1Api(api_client)
    # `streamapp operator --kubeconfig` sets $KUBECONFIG after the kubernetes client read it at import;
    # the operator inherits it from here instead.
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_path))
    operators.start()
    create_app(api_client, namespace, replicas=REPLICAS, partitions=6)

    def one_disruption_allowed() -> Any:
        status = budget_status(policy, namespace)
        if status is None:
            return None
        counts = (status.expected_pods, status.current_healthy, status.disruptions_allowed)
        return status if counts == (REPLICAS, REPLICAS, 1) else None

    status = wait_for(one_disruption_allowed, BUDGET_TIMEOUT_S, "PDB: 3 expected, 3 healthy, 1 allowed")
    assert status.desired_healthy == REPLICAS - 1
    evict(core, namespace, f"{APP}-0")
    with pytest.raises(ApiException) as refused:
        evict(core, namespace, f"{APP}-1")
    assert refused.value.status == 429, refused.value.body
    assert "disruption budget" in str(refused.value.body)
    spared: Any = core.read_namespaced_pod(f"{APP}-1", namespace)
    assert spared.metadata.deletion_timestamp is None
