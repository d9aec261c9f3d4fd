"""What the real-node tests share beside `cluster_tools` (kubectl, where a claim lives): containerd's
ctr as a user runs it, restricted namespaces, pods and their readiness."""

from __future__ import annotations

import subprocess
from typing import Any

from kubernetes import client

from localcluster.controlplane import LocalCluster
from realnode import build as node_build
from realnode import images

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def ctr(cluster: LocalCluster, *args: str) -> None:
    """containerd's own client on the node's socket, in the kubelet's namespace."""
    socket = cluster.layout.real_node.runtime.socket
    subprocess.run(
        [
            str(node_build.bin_dir() / "ctr"),
            f"--address={socket}",
            f"--namespace={images.CRI_NAMESPACE}",
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def restricted_namespace(api: client.ApiClient, name: str) -> str:
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name, "labels": RESTRICTED}})
    return name


def pod(api: client.ApiClient, namespace: str, name: str) -> Any | None:
    try:
        return client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def ready(found: Any | None) -> bool:
    conditions = (found.status.conditions if found is not None and found.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
