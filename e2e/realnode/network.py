"""The real node's pod network: one Linux bridge, pods on it through CNI's bridge plugin.

The bridge is created, with its gateway address, before the control plane starts, because that address
is also the node's IP and the API server's: pods reach the API server through the ``kubernetes``
Service (kube-proxy DNATs it to this address), and the API server reaches the kubelet here. Nothing
binds the host's external interfaces. The subnet avoids podman's default (10.88.0.0/16) and kwok's
(10.244.0.0/16).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

BRIDGE = "streamapp0"
POD_CIDR = "10.90.0.0/16"
GATEWAY = "10.90.0.1"
NETWORK_NAME = "streamapp"
CNI_VERSION = "1.0.0"


def conflist() -> dict[str, Any]:
    """bridge + host-local IPAM (the gateway is the node), portmap for hostPorts; masquerade off the subnet."""
    return {
        "cniVersion": CNI_VERSION,
        "name": NETWORK_NAME,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def write_conflist(conf_dir: Path) -> Path:
    conf_dir.mkdir(parents=True, exist_ok=True)
    target = conf_dir / f"10-{NETWORK_NAME}.conflist"
    target.write_text(json.dumps(conflist(), indent=2) + "\n")
    return target


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def ensure_bridge() -> None:
    """Create the bridge with the gateway address (idempotent), so the address can be bound at once."""
    if _ip("link", "show", BRIDGE, check=False).returncode != 0:
        _ip("link", "add", BRIDGE, "type", "bridge")
    prefix = POD_CIDR.split("/")[1]
    if GATEWAY not in _ip("-4", "-o", "addr", "show", "dev", BRIDGE).stdout:
        _ip("addr", "add", f"{GATEWAY}/{prefix}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")


def remove_bridge() -> None:
    """Delete the bridge (its pods' veths went with their network namespaces)."""
    _ip("link", "delete", BRIDGE, check=False)
