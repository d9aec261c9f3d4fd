"""kube-proxy of the real node (iptables mode): the ``kubernetes`` Service, and any Service, for pods.

Its conntrack tuning is turned off (``maxPerCore: 0``): it would write host-wide sysctls, which a test
node has no business changing. Metrics and health bind loopback ports chosen free at start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def configuration(
    *, kubeconfig: Path, node_name: str, cluster_cidr: str, healthz_port: int, metrics_port: int
) -> dict[str, Any]:
    """The KubeProxyConfiguration (v1alpha1) as a JSON-serialisable dict."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "clusterCIDR": cluster_cidr,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "conntrack": {"maxPerCore": 0},
        "nodePortAddresses": ["primary"],
    }


def argv(kube_proxy: Path, config: Path) -> list[str]:
    return [str(kube_proxy), f"--config={config}", "--v=1"]
