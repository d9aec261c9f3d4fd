"""What the real-node tests share: kubectl and containerd's ctr as a user runs them, restricted
namespaces, where a claim lives on this machine, pods and their readiness."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from kubernetes import client

from localcluster import build as cluster_build
from localcluster.controlplane import LocalCluster
from realnode import build as node_build
from realnode import images

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


def host_path(api: client.ApiClient, namespace: str, claim: str) -> Path | None:
    """Where the bound hostPath volume of ``claim`` lives on this machine, once bound."""
    core = client.CoreV1Api(api)
    volume = core.read_namespaced_persistent_volume_claim(claim, namespace).spec.volume_name
    if not volume:
        return None
    return Path(core.read_persistent_volume(volume).spec.host_path.path)


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
