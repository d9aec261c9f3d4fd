"""The kubelet of the real node: its KubeletConfiguration (pure) and command line.

What differs from a kubeadm node, and why:

- ``failCgroupV1: false``: this host has the hybrid cgroup v1 layout (cgroup2 mounted only at
  ``/sys/fs/cgroup/unified``, no controllers on it), which the kubelet refuses by default since 1.35.
  v1 is deprecated but still supported; the alternative, a cgroup v2 host, is not what CI gives us.
- ``cgroupDriver: cgroupfs``: PID 1 is not systemd (containerd's runc options agree).
- ``failSwapOn: false`` (no swap here, but a developer's machine may have some), hard eviction only
  when memory or disk is really short, image GC thresholds near full: a test node must not evict the
  pods under test because a shared developer disk is 90% used.
- Authentication by client certificates and webhook tokens, authorization by webhook (the API server's
  ``kubectl logs``/``exec`` identity is allowed through RBAC), anonymous access off; the read-only port off.
- No cluster DNS: pods reach the API server by the ``kubernetes`` Service's ClusterIP, which the kubelet
  puts in their environment, and kube-proxy routes (see :mod:`realnode.network`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class KubeletPaths:
    base: Path

    @property
    def root(self) -> Path:
        return self.base / "kubelet"

    @property
    def config(self) -> Path:
        return self.base / "kubelet-config.json"

    @property
    def pod_logs(self) -> Path:
        return self.base / "pod-logs"


def configuration(
    *,
    client_ca: Path,
    serving_cert: Path,
    serving_key: Path,
    runtime_socket: Path,
    address: str,
    port: int,
    healthz_port: int,
    pod_logs: Path,
) -> dict[str, Any]:
    """The KubeletConfiguration (v1beta1) of the node, as a JSON-serialisable dict."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": address,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(serving_cert),
        "tlsPrivateKeyFile": str(serving_key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{runtime_socket}",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(pod_logs),
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "evictionHard": {"memory.available": "200Mi", "nodefs.available": "2%", "imagefs.available": "2%"},
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 98,
        "serializeImagePulls": False,
        "maxPods": 64,
        "nodeStatusUpdateFrequency": "5s",
        "shutdownGracePeriod": "0s",
    }


def argv(kubelet: Path, paths: KubeletPaths, kubeconfig: Path, node_name: str, node_ip: str) -> list[str]:
    """Flags only for what the config file cannot say."""
    return [
        str(kubelet),
        f"--config={paths.config}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={paths.root}",
        f"--hostname-override={node_name}",
        f"--node-ip={node_ip}",
        "--v=1",
    ]
