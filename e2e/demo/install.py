"""The operator installed as users install it: the Helm chart, pinned helm, values for the process node.

`e2e/local-install/values.yaml` places the operator's pods on the process node (real processes); the
demo adds only the namespace to watch and one replica (leader election stays on).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml

from helmtool import build as helmbuild

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamapp-operator"
LOCAL_VALUES = ROOT / "e2e" / "local-install" / "values.yaml"
RELEASE = "streamapp-operator"
HELM_TIMEOUT = "300s"


class Helm:
    """The pinned helm with private config and cache dirs, talking to one cluster."""

    def __init__(self, kubeconfig: Path) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="streamapp-demo-helm-"))
        self.kubeconfig = kubeconfig

    def run(self, *args: str) -> str:
        command = [
            "env",
            f"HELM_CACHE_HOME={self.home / 'cache'}",
            f"HELM_CONFIG_HOME={self.home / 'config'}",
            f"HELM_DATA_HOME={self.home / 'data'}",
            str(helmbuild.helm_path()),
            "--kubeconfig",
            str(self.kubeconfig),
            *args,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"helm {args[0]} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def install(self, release_namespace: str, watch: str) -> None:
        """`helm install --create-namespace --wait`: returns once the operator's pod is Ready."""
        values = self.home / "demo-values.yaml"
        values.write_text(yaml.safe_dump({"watchNamespaces": [watch], "replicaCount": 1}))
        self.run(
            "install", RELEASE, str(CHART), "-n", release_namespace, "--create-namespace",
            "-f", str(LOCAL_VALUES), "-f", str(values), "--wait", "--timeout", HELM_TIMEOUT,
        )  # fmt: skip

    def uninstall(self, release_namespace: str) -> None:
        self.run("uninstall", RELEASE, "-n", release_namespace, "--wait")
