"""The product as users run it, on a real kubelet: the operator installed by its chart, the shipped
sample applied as written, every pod a container of the built image in namespaces that enforce the
``restricted`` Pod Security level; an executor container SIGKILLed mid-stream; output exactly once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from kubernetes import client

from localcluster import build as cluster_build
from localcluster.controlplane import REPO_ROOT, LocalCluster
from localcluster.waiting import wait_for
from realapps import committed_everything
from realnode import build as node_build
from realnode import images
from streamapp.api.names import member_name
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout

CHART = REPO_ROOT / "charts" / "streamapp-operator"
SAMPLE = REPO_ROOT / "manifests" / "samples" / "streamapp.yaml"
APP = "counts"
PARTITIONS = 12
pytestmark = pytest.mark.node

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def kubectl(cluster: LocalCluster, *args: str, timeout: float = 300) -> str:
    """The cluster's kubectl, as a user runs it; fails with its stderr."""
    done = subprocess.run(
        [str(cluster_build.bin_dir() / "kubectl"), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def restricted_namespace(api: client.ApiClient, name: str) -> str:
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name, "labels": RESTRICTED}})
    return name


def claim_directory(api: client.ApiClient, namespace: str, claim: str) -> Path | None:
    """Where the bound hostPath volume of ``claim`` lives on this machine, once bound."""
    core = client.CoreV1Api(api)
    volume = core.read_namespaced_persistent_volume_claim(claim, namespace).spec.volume_name
    if not volume:
        return None
    return Path(core.read_persistent_volume(volume).spec.host_path.path)


def member_pod(api: client.ApiClient, namespace: str, index: int) -> Any:
    return client.CoreV1Api(api).read_namespaced_pod(member_name(APP, index), namespace)


def ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def kill_container(cluster: LocalCluster, container_id: str) -> None:
    """SIGKILL a container through containerd, as the OOM killer or a crash would end it."""
    runtime_id = container_id.removeprefix("containerd://")
    socket = cluster.layout.real_node.runtime.socket
    subprocess.run(
        [
            str(node_build.bin_dir() / "ctr"),
            f"--address={socket}",
            f"--namespace={images.CRI_NAMESPACE}",
            "tasks",
            "kill",
            "--signal",
            "SIGKILL",
            runtime_id,
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def test_the_shipped_sample_runs_exactly_once_in_containers_under_restricted_pod_security(
    node_cluster: LocalCluster, node_api: client.ApiClient, helm: list[str]
) -> None:
    system = restricted_namespace(node_api, "streamapp-system")
    subprocess.run(
        [
            *helm,
            "--kubeconfig",
            str(node_cluster.kubeconfig),
            "install",
            "streamapp-operator",
            str(CHART),
            "-n",
            system,
            "--wait",
            "--timeout",
            "300s",
        ],
        check=True,
        timeout=360,
    )
    namespace = restricted_namespace(node_api, "counts")
    kubectl(node_cluster, "apply", "-n", namespace, "-f", str(SAMPLE))

    data = wait_for(
        lambda: claim_directory(node_api, namespace, "counts-data"), 120, "the shared claim bound"
    )
    state, log = StateLayout(data / "state"), FileLog(data / "input")
    wait_for(
        lambda: all(any(m.end > 0 for m in accepted_manifests(state, p)) for p in range(PARTITIONS)),
        600,
        "every partition processed",
    )

    victim = member_pod(node_api, namespace, 1)
    (status,) = victim.status.container_statuses
    kill_container(node_cluster, status.container_id)
    wait_for(
        lambda: (
            (pod := member_pod(node_api, namespace, 1)).status.container_statuses[0].restart_count
            > status.restart_count
            and ready(pod)
        ),
        300,
        "the killed executor restarted and ready",
    )

    # Stop the input (the generator finishes its chunk on SIGTERM), then let the executors drain it.
    client.AppsV1Api(node_api).patch_namespaced_deployment_scale(
        "counts-input", namespace, {"spec": {"replicas": 0}}
    )
    wait_for(
        lambda: (
            not client.CoreV1Api(node_api)
            .list_namespaced_pod(namespace, label_selector="app.kubernetes.io/name=counts-input")
            .items
        ),
        120,
        "the input generator stopped",
    )
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 300, "all input committed")
    assert sum(log.end_offset(p) for p in range(PARTITIONS)) > 0
    for partition in range(PARTITIONS):
        check_partition(state, data / "output", log, partition)
