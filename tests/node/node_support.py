"""What the real-node tests share beside `cluster_tools` (kubectl, where a claim lives): the node they
run on (this machine's, or kind's: :mod:`kindnode`), restricted namespaces, pods and their readiness."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client

from localcluster.controlplane import LocalCluster
from realnode import build as node_build
from realnode import images

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


class Node(Protocol):
    """What a real-node test needs of the cluster: its kubeconfig, and containerd's own client on its
    node (to kill a container or tag an image as an operator of the node would)."""

    @property
    def kubeconfig(self) -> Path: ...

    def ctr(self, *args: str) -> None: ...


@dataclass(frozen=True)
class LocalNode:
    """The local cluster's real node (``e2e/realnode``): ``ctr`` on its containerd socket."""

    cluster: LocalCluster

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    def ctr(self, *args: str) -> None:
        socket = self.cluster.layout.real_node.runtime.socket
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
