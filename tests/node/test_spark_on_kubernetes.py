"""Spark on Kubernetes (`spec.executor.sparkExecutors`) on the real node: each member is Spark's driver
and its Spark executors are pods of the same image in the app's namespace, under `restricted` Pod
Security, owned by the member pod. The count pipeline's batches run on those pods (their logs show
Spark's tasks), through a handoff to a second member with executors of its own; output exactly once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from kubernetes import client
from node_support import Node, restricted_namespace

from appbody import app_body
from cluster_tools import claim_directory, kubectl
from localcluster.waiting import wait_for
from realapps import committed_everything
from streamapp.api.names import APPS, GROUP, VERSION, member_name
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

pytestmark = [pytest.mark.node, pytest.mark.long]

APP = "spk"
PARTITIONS = 4
SPARK_EXECUTOR = "spark-role=executor"


def spark_app(image: str) -> dict[str, Any]:
    return app_body(
        APP,
        namespace=None,
        uid=None,
        replicas=1,
        partitions=PARTITIONS,
        sink="/data/output",
        pipeline={"merge": "count"},
        executor={
            "image": image,
            "resources": {"requests": {"cpu": "200m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
            "sparkConf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
            "sparkExecutors": {"instances": 1, "memory": "512m", "cpuRequest": "100m"},
            "podTemplate": {
                "spec": {
                    "securityContext": {"fsGroup": 65532},
                    "containers": [
                        {"name": "executor", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
                    ],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"{APP}-data"}}],
                }
            },
        },
        rebalance={"protocol": "streamapp"},
    )


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def feed(data: Path, seed: int) -> None:
    """Input written on the host, readable by the pods' non-root user."""
    generate(FileLog(data / "input"), GenerateSpec(partitions=PARTITIONS, count=1_500, keys=400, seed=seed))
    for root, dirs, files in os.walk(data / "input"):
        for name in [*dirs, *files]:
            os.chmod(Path(root) / name, 0o755 if name in dirs else 0o644)


def spark_executors(api: client.ApiClient, namespace: str) -> dict[str, list[Any]]:
    """Running Spark executor pods by the member pod that owns them."""
    owned: dict[str, list[Any]] = {}
    for found in client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=SPARK_EXECUTOR).items:
        if found.status.phase != "Running":
            continue
        for owner in found.metadata.owner_references or []:
            if owner.kind == "Pod":
                owned.setdefault(owner.name, []).append(found)
    return owned


def ran_tasks(cluster: Node, namespace: str, pod_name: str) -> bool:
    """Spark's own log of the executor pod says it ran tasks."""
    return "Running task" in kubectl(cluster.kubeconfig, "logs", "-n", namespace, pod_name)


def active_members(api: client.ApiClient, namespace: str) -> int:
    found = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP)
    status = found.get("status") or {}
    tasks = status.get("tasks") or {}
    members = status.get("members") or []
    settled = tasks.get("active") == PARTITIONS and not tasks.get("warming") and not tasks.get("revoking")
    return sum(1 for m in members if m.get("active")) if settled else 0


@pytest.fixture
def namespace(node_api: client.ApiClient, operator_release: str) -> Iterator[str]:
    name = restricted_namespace(node_api, "spark-on-kubernetes")
    try:
        yield name
    finally:
        client.CoreV1Api(node_api).delete_namespace(name)


def test_members_run_their_batches_on_spark_executor_pods_through_a_handoff(
    node_cluster: Node, node_api: client.ApiClient, namespace: str, image: str
) -> None:
    core, custom = client.CoreV1Api(node_api), client.CustomObjectsApi(node_api)
    core.create_namespaced_persistent_volume_claim(namespace, claim(f"{APP}-data"))
    data = wait_for(
        lambda: claim_directory(node_api, namespace, f"{APP}-data"), 120, "the shared claim bound"
    )
    state, log = StateLayout(data / "state"), FileLog(data / "input")
    feed(data, seed=1)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, spark_app(image))
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 600, "member 0 committed the input")
    first = member_name(APP, 0)
    executors = wait_for(
        lambda: spark_executors(node_api, namespace).get(first), 120, "member 0's executor pod"
    )
    assert all(ran_tasks(node_cluster, namespace, e.metadata.name) for e in executors)

    # A second member: tasks are handed to it, and it starts executors of its own.
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP, {"spec": {"replicas": 2}})
    wait_for(lambda: active_members(node_api, namespace) == 2, 600, "both members active, nothing moving")
    feed(data, seed=2)
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 600, "the new input committed")
    second = member_name(APP, 1)
    owned = wait_for(lambda: spark_executors(node_api, namespace).get(second), 120, "member 1's executor pod")
    wait_for(
        lambda: all(ran_tasks(node_cluster, namespace, e.metadata.name) for e in owned), 120, "its tasks"
    )
    for partition in range(PARTITIONS):
        check_partition(state, data / "output", log, partition)
