"""The cluster's worker nodes: three kwok nodes (zones a/b/c) and the process node's identity.

Pods land on kwok nodes by default (they go Running/Ready without running anything, so a test can have
hundreds). The process node is tainted, so only pods that tolerate :data:`PROCESS_NODE_TAINT` and select
:data:`PROCESS_NODE_LABELS` run there as real local processes.
"""

from __future__ import annotations

from typing import Any

from processnode.node import PROCESS_NODE_LABELS, PROCESS_NODE_TAINT

ZONE_LABEL = "topology.kubernetes.io/zone"
KWOK_NODES = {"kwok-a": "zone-a", "kwok-b": "zone-b", "kwok-c": "zone-c"}
KWOK_NODE_TYPE_LABEL = ("type", "kwok")
PROCESS_NODE_NAME = "process-0"
PROCESS_NODE_ZONE = "zone-a"


def kwok_node(name: str, zone: str) -> dict[str, Any]:
    """A Node object kwok will manage (annotation selector) with generous fake capacity."""
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "500"}  # 1,500 pods: bench/apiscale.py
    key, value = KWOK_NODE_TYPE_LABEL
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/agent": "",
                ZONE_LABEL: zone,
                key: value,
            },
        },
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def process_node_tolerations() -> list[dict[str, str]]:
    """What a pod spec needs, with :func:`process_node_selector`, to run on the process node."""
    return [{**PROCESS_NODE_TAINT, "operator": "Equal"}]


def process_node_selector() -> dict[str, str]:
    """nodeSelector that pins a pod to the process node."""
    return dict(PROCESS_NODE_LABELS)


def kwok_node_selector() -> dict[str, str]:
    """nodeSelector that keeps a pod on kwok (fake) nodes."""
    key, value = KWOK_NODE_TYPE_LABEL
    return {key: value}
