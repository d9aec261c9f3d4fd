"""containerd for the real node: its configuration (pure) and command line.

Config version 3 (containerd 2.x). Everything lives under the node's directory: root, state, the socket,
the CNI configuration; the CRI plugin uses runc (Debian's, with seccomp) through the v2 shim, cgroupfs
(this host has no systemd as PID 1), the overlayfs snapshotter, and the pause image built here
(:mod:`realnode.images`), which is pinned so the image garbage collector never removes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RuntimePaths:
    """containerd's directories and socket under the node's directory."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "containerd" / "root"

    @property
    def state(self) -> Path:
        return self.base / "containerd" / "state"

    @property
    def socket(self) -> Path:
        return self.base / "containerd" / "containerd.sock"

    @property
    def config(self) -> Path:
        return self.base / "containerd" / "config.toml"

    @property
    def cni_conf(self) -> Path:
        return self.base / "cni" / "net.d"


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_toml(paths: RuntimePaths, cni_bin: Path, runc: str, pause_image: str) -> str:
    """The config file's text (written by hand: a few tables, and the standard library reads TOML only)."""
    cri_runtime = "plugins.'io.containerd.cri.v1.runtime'"
    cri_images = "plugins.'io.containerd.cri.v1.images'"
    return "\n".join(
        [
            "version = 3",
            f"root = {_toml_string(str(paths.root))}",
            f"state = {_toml_string(str(paths.state))}",
            "",
            "[grpc]",
            f"address = {_toml_string(str(paths.socket))}",
            "",
            f"[{cri_images}]",
            'snapshotter = "overlayfs"',
            "",
            f"[{cri_images}.pinned_images]",
            f"sandbox = {_toml_string(pause_image)}",
            "",
            f"[{cri_runtime}]",
            "netns_mounts_under_state_dir = true",  # so cleanup finds them under the node's directory
            # Lowering a process' oom_score_adj (the kubelet asks -997 for Guaranteed pods) needs
            # CAP_SYS_RESOURCE, which root lacks on this kind of VM: runc's init then dies ("can't get
            # final child's PID from pipe"). Clamp to containerd's own score instead, as rootless nodes do.
            "restrict_oom_score_adj = true",
            "",
            f"[{cri_runtime}.containerd]",
            'default_runtime_name = "runc"',
            "",
            f"[{cri_runtime}.containerd.runtimes.runc]",
            'runtime_type = "io.containerd.runc.v2"',
            "",
            f"[{cri_runtime}.containerd.runtimes.runc.options]",
            f"BinaryName = {_toml_string(runc)}",
            "SystemdCgroup = false",
            "",
            f"[{cri_runtime}.cni]",
            f"bin_dirs = [{_toml_string(str(cni_bin))}]",
            f"conf_dir = {_toml_string(str(paths.cni_conf))}",
            "",
            "[plugins.'io.containerd.grpc.v1.cri']",
            'stream_server_address = "127.0.0.1"',
            "",
        ]
    )


def argv(containerd: Path, paths: RuntimePaths) -> list[str]:
    return [str(containerd), f"--config={paths.config}"]
