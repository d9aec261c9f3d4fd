"""Leave the host as the real node found it, even after a crash: no container process, mount, network
namespace, bridge or iptables rule of the node survives ``down``.

Stopping the kubelet and containerd does not stop containers (each runs under its own shim, re-parented
to init), so the node is torn down from the outside: every process in a pod cgroup and every shim of
our containerd build is killed, then every mount under the node's directory is detached (deepest
first), kube-proxy removes its own rules, the bridge plugin's masquerade chains are dropped, and the
bridge is deleted.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

from realnode import network

POD_CGROUP_PREFIX = "/kubepods"
# The bridge plugin's masquerade rule in nat POSTROUTING carries the network's name in its comment.
CNI_MASQUERADE_RULE = re.compile(
    r'^-A POSTROUTING .*name: \\"' + re.escape(network.NETWORK_NAME) + r'\\".* -j (CNI-\S+)'
)


def node_pids(shim: Path) -> Iterator[int]:
    """Processes of the node's pods (by cgroup) and its runtime shims (by executable)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(entry / "exe") == str(shim):
                yield int(entry.name)
                continue
            for line in (entry / "cgroup").read_text().splitlines():
                if line.split(":", 2)[-1].startswith(POD_CGROUP_PREFIX):
                    yield int(entry.name)
                    break


def kill_containers(shim: Path) -> int:
    """SIGKILL every pod process and shim; returns how many were signalled."""
    count = 0
    for pid in set(node_pids(shim)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            count += 1
    return count


def mounts_under(base: Path, mountinfo: str) -> list[str]:
    """Mount points below ``base`` in a mountinfo text, deepest first (octal escapes such as ``\\040``
    decoded)."""
    prefix = str(base).rstrip("/") + "/"
    found = set()
    for line in mountinfo.splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point.startswith(prefix):
            found.add(point)
    return sorted(found, key=lambda p: (p.count("/"), p), reverse=True)


def unmount_all(base: Path) -> None:
    """Lazily detach every mount under ``base`` (overlay rootfs, secret tmpfs, netns bind mounts)."""
    for point in mounts_under(base.resolve(), Path("/proc/self/mountinfo").read_text()):
        subprocess.run(["umount", "--lazy", point], check=False, capture_output=True)


# Chains the kubelet creates on start (its iptables canary and the localnet firewall); kube-proxy's own
# are removed by ``kube-proxy --cleanup``.
KUBELET_CHAINS = ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=False, capture_output=True, text=True)


def drop_chains(tool: str, table: str, chains: set[str]) -> None:
    """Delete every rule that jumps to one of ``chains``, then flush and delete the chains."""
    for line in _run(tool, "-t", table, "-S").stdout.splitlines():
        words = shlex.split(line)
        if words[:1] == ["-A"] and words[-2:-1] == ["-j"] and words[-1] in chains:
            _run(tool, "-t", table, "-D", *words[1:])
    listed = _run(tool, "-t", table, "-S").stdout.splitlines()
    for chain in chains & {line.split()[1] for line in listed if line.startswith("-N ")}:
        _run(tool, "-t", table, "-F", chain)
        _run(tool, "-t", table, "-X", chain)


def remove_rules() -> None:
    """The kubelet's chains (IPv4 and IPv6), and the bridge plugin's masquerade chains of our network
    (pods killed without a CNI DEL leave them)."""
    masquerade = {
        match.group(1)
        for line in _run("iptables", "-t", "nat", "-S", "POSTROUTING").stdout.splitlines()
        if (match := CNI_MASQUERADE_RULE.match(line))
    }
    for tool in filter(shutil.which, ("iptables", "ip6tables")):
        drop_chains(tool, "nat", set(KUBELET_CHAINS) | (masquerade if tool == "iptables" else set()))
        for table in ("filter", "mangle"):
            drop_chains(tool, table, set(KUBELET_CHAINS))


def remove_proxy_rules(kube_proxy: Path) -> None:
    """``kube-proxy --cleanup`` removes the chains and rules it created."""
    if kube_proxy.is_file():
        subprocess.run([str(kube_proxy), "--cleanup"], check=False, capture_output=True)


def tear_down(base: Path, shim: Path, kube_proxy: Path) -> None:
    """Everything above, in an order that never leaves a mount busy or a rule pointing nowhere."""
    kill_containers(shim)
    unmount_all(base)
    remove_proxy_rules(kube_proxy)
    remove_rules()
    network.remove_bridge()
