"""The process node's Node object and heartbeats (Lease every 10 s, status every minute).

The node lifecycle controller taints a node whose Lease stops being renewed; renewing it like the
kubelet keeps pods schedulable and un-evicted for as long as the agent lives.
"""

from __future__ import annotations

import datetime
import platform
from dataclasses import dataclass, field
from typing import Any

from processnode.container import now_rfc3339
from processnode.kube import NodeClient

Json = dict[str, Any]
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40
LEASE_RENEW_S = 10.0
STATUS_REPORT_S = 60.0
# Only pods that select this label and tolerate this taint run as real processes; others go elsewhere.
PROCESS_NODE_LABELS = {"streamapp.dev/node-kind": "process"}
PROCESS_NODE_TAINT = {"key": "streamapp.dev/process-node", "value": "true", "effect": "NoSchedule"}


@dataclass(frozen=True)
class NodeSpec:
    """Identity and advertised capacity of the process node."""

    name: str
    ip: str = "127.0.0.1"
    zone: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    capacity: dict[str, str] = field(default_factory=lambda: {"cpu": "16", "memory": "64Gi", "pods": "110"})
    kubelet_version: str = "v0.0.0-process-node"
    kubelet_port: int = 0  # where the log server listens (0: no ``kubectl logs``)


def node_object(spec: NodeSpec) -> Json:
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **({"topology.kubernetes.io/zone": spec.zone} if spec.zone else {}),
        **spec.labels,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {"taints": spec.taints},
    }


def node_status(spec: NodeSpec, since: str) -> Json:
    """Ready plus the pressure conditions a kubelet reports; ``since`` is when they became true."""
    now = now_rfc3339()

    def condition(kind: str, status: str, reason: str) -> Json:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": f"process node: {reason}",
            "lastHeartbeatTime": now,
            "lastTransitionTime": since,
        }

    return {
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            condition("Ready", "True", "KubeletReady"),
        ],
        "addresses": [{"type": "InternalIP", "address": spec.ip}, {"type": "Hostname", "address": spec.name}],
        "capacity": spec.capacity,
        "allocatable": spec.capacity,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": spec.kubelet_port}},
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "osImage": platform.platform(),
            "kernelVersion": platform.release(),
            "kubeletVersion": spec.kubelet_version,
            "kubeProxyVersion": "",
            "containerRuntimeVersion": "process://local",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }


class NodeHeartbeat:
    """Registers the Node once, then keeps its Lease and Ready condition fresh."""

    def __init__(self, api: NodeClient, spec: NodeSpec) -> None:
        self.api = api
        self.spec = spec
        self.owner: Json | None = None
        self.since = now_rfc3339()

    def register(self) -> None:
        """Create the Node (with its taints and labels) unless it exists, then report status."""
        existing = self.api.read_node(self.spec.name)
        if existing is None:
            self.api.create_node(node_object(self.spec))
            existing = self.api.read_node(self.spec.name)
        assert existing is not None
        self.owner = {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self.spec.name,
            "uid": existing["metadata"]["uid"],
        }
        self.report_status()
        self.renew_lease()

    def report_status(self) -> None:
        self.api.patch_node_status(self.spec.name, node_status(self.spec, self.since))

    def renew_lease(self) -> None:
        renew = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {
            "holderIdentity": self.spec.name,
            "leaseDurationSeconds": LEASE_DURATION_S,
            "renewTime": renew,
        }
        self.api.renew_lease(LEASE_NAMESPACE, self.spec.name, spec, self.owner)
