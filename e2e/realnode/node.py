"""Start the real node on a running control plane: containerd, the kubelet and kube-proxy.

Called by :class:`localcluster.controlplane.LocalCluster` when it is asked for a real node; the
processes are spawned through the cluster's own ``spawn`` so they are recorded in its state file and
``down`` stops them (then :mod:`realnode.cleanup` removes what they leave behind).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from localcluster import certs, kubeconfig, processes
from localcluster.processes import ProcessRecord
from realnode import build, cleanup, images, kubelet, network, proxy, runtime

NODE_NAME = "real-0"

Spawn = Callable[[str, list[str], Mapping[str, str] | None], ProcessRecord]


@dataclass(frozen=True)
class NodeLayout:
    """The node's files under the cluster's directory."""

    base: Path

    @property
    def runtime(self) -> runtime.RuntimePaths:
        return runtime.RuntimePaths(self.base)

    @property
    def kubelet(self) -> kubelet.KubeletPaths:
        return kubelet.KubeletPaths(self.base)

    @property
    def proxy_config(self) -> Path:
        return self.base / "kube-proxy-config.json"

    @property
    def work(self) -> Path:
        return self.base / "work"


def requirements_missing() -> list[str]:
    """What this host lacks to run the node (root, runc, iptables, gcc, ip), for a clear skip or error."""
    missing = [] if os.geteuid() == 0 else ["root"]
    return missing + [tool for tool in ("runc", "iptables", "gcc", "ip") if shutil.which(tool) is None]


def _ctr(layout: NodeLayout) -> list[str]:
    return [str(build.bin_dir() / "ctr"), f"--address={layout.runtime.socket}"]


def _runtime_answers(layout: NodeLayout) -> bool:
    return subprocess.run([*_ctr(layout), "version"], capture_output=True).returncode == 0


def start_runtime(layout: NodeLayout, spawn: Spawn, timeout_s: float) -> None:
    """containerd with the node's config, and the pause image imported before any pod needs it."""
    paths = layout.runtime
    paths.config.parent.mkdir(parents=True, exist_ok=True)
    runc = shutil.which("runc") or "runc"  # Debian's, with libseccomp (requirements_missing checks it)
    paths.config.write_text(runtime.config_toml(paths, build.cni_dir(), runc, images.PAUSE_IMAGE))
    network.write_conflist(paths.cni_conf)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(build.bin_dir()), env.get("PATH", "")])  # the shim is found on PATH
    record = spawn("containerd", runtime.argv(build.bin_dir() / "containerd", paths), env)
    processes.wait_until(lambda: _runtime_answers(layout), timeout_s, "containerd to answer", record)
    images.import_pause(build.bin_dir() / "ctr", paths.socket, layout.work)


def start_kubelet(
    layout: NodeLayout, ca: certs.CertificateAuthority, server: str, spawn: Spawn, ports: list[int]
) -> None:
    """The kubelet as ``system:node:real-0`` (the Node authorizer and NodeRestriction apply to it)."""
    identity = certs.Identity(f"system:node:{NODE_NAME}", ("system:nodes",))
    client_pair = ca.issue(f"client-{NODE_NAME}", identity)
    config_file = kubeconfig.write(
        layout.base / "kubelet.kubeconfig", server, ca.pair.cert, client_pair, identity.user
    )
    serving = ca.issue(
        f"{NODE_NAME}-serving", identity, server_names=(NODE_NAME, "localhost"), server_ips=(network.GATEWAY,)
    )
    paths = layout.kubelet
    settings = kubelet.configuration(
        client_ca=ca.pair.cert,
        serving_cert=serving.cert,
        serving_key=serving.key,
        runtime_socket=layout.runtime.socket,
        address=network.GATEWAY,
        port=ports[0],
        healthz_port=ports[1],
        pod_logs=paths.pod_logs,
    )
    paths.config.write_text(json.dumps(settings, indent=2) + "\n")
    spawn(
        "kubelet",
        kubelet.argv(build.bin_dir() / "kubelet", paths, config_file, NODE_NAME, network.GATEWAY),
        None,
    )


def start_proxy(
    layout: NodeLayout, ca: certs.CertificateAuthority, server: str, spawn: Spawn, ports: list[int]
) -> None:
    """kube-proxy as ``system:kube-proxy``, the user the default ``system:node-proxier`` binding names."""
    identity = certs.Identity("system:kube-proxy")
    pair = ca.issue("client-kube-proxy", identity)
    config_file = kubeconfig.write(
        layout.base / "kube-proxy.kubeconfig", server, ca.pair.cert, pair, identity.user
    )
    settings = proxy.configuration(
        kubeconfig=config_file,
        node_name=NODE_NAME,
        cluster_cidr=network.POD_CIDR,
        healthz_port=ports[0],
        metrics_port=ports[1],
    )
    layout.proxy_config.write_text(json.dumps(settings, indent=2) + "\n")
    spawn("kube-proxy", proxy.argv(build.bin_dir() / "kube-proxy", layout.proxy_config), None)


def start(
    layout: NodeLayout, ca: certs.CertificateAuthority, server: str, spawn: Spawn, timeout_s: float
) -> None:
    """Runtime, kubelet, kube-proxy; the caller waits for the Node to turn Ready."""
    layout.base.mkdir(parents=True, exist_ok=True)
    ports = processes.free_ports(4)
    start_runtime(layout, spawn, timeout_s)
    start_kubelet(layout, ca, server, spawn, ports[:2])
    start_proxy(layout, ca, server, spawn, ports[2:])


def tear_down(layout: NodeLayout) -> None:
    """What stopping the processes leaves behind (see :mod:`realnode.cleanup`)."""
    bin_dir = build.bin_dir()
    cleanup.tear_down(layout.base, bin_dir / "containerd-shim-runc-v2", bin_dir / "kube-proxy")


def load_image(
    layout: NodeLayout, podman_command: list[str], reference: str, also_as: tuple[str, ...] = ()
) -> None:
    """Put a podman-built image into the node (there is no registry to pull it from), also under the
    names pod specs use for it."""
    images.import_from_podman(
        podman_command, reference, build.bin_dir() / "ctr", layout.runtime.socket, also_as
    )
