"""Pod IPs on the loopback network: every 127.0.0.0/8 address is local on Linux without any setup.

Each pod gets its own address from a /16 of its node's (127.<n>.0.0/16), so two pods can both serve
on port 8080 as long as they bind to their pod IP (``fieldRef: status.podIP``) rather than 0.0.0.0;
probes go to the pod IP, as a kubelet's do. Each local cluster's node takes its own /16, derived from
its state directory, so pods of clusters running side by side on one machine never share an address.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

# 127.<n>.0.0/16 for n in [10, 250): clear of 127.0.0.0/16, where the control plane listens.
_FIRST_OCTET, _OCTETS = 10, 240


def pod_network_for(node_state: str) -> ipaddress.IPv4Network:
    """The node's pod network, a stable function of its state directory."""
    digest = int.from_bytes(hashlib.sha256(node_state.encode()).digest()[:4], "big")
    return ipaddress.IPv4Network(f"127.{_FIRST_OCTET + digest % _OCTETS}.0.0/16")


@dataclass(frozen=True)
class PodAddresses:
    """The pod's own IP and the node's (``status.podIP`` / ``status.hostIP``)."""

    pod_ip: str
    node_ip: str


class LoopbackPool:
    """Hands out pod IPs and takes them back when pods go away."""

    def __init__(self, network: ipaddress.IPv4Network) -> None:
        self._free = iter(network.hosts())
        self._returned: list[str] = []
        self._owners: dict[str, str] = {}

    def acquire(self, uid: str) -> str:
        """The pod's address, stable for the lifetime of the pod (its UID)."""
        if uid not in self._owners:
            self._owners[uid] = self._returned.pop(0) if self._returned else str(next(self._free))
        return self._owners[uid]

    def release(self, uid: str) -> None:
        address = self._owners.pop(uid, None)
        if address is not None:
            self._returned.append(address)
