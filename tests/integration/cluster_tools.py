"""Command-line tools against the cluster under test, run as a user would run them."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from localcluster.build import bin_dir
from localcluster.nodes import process_node_selector, process_node_tolerations


def kubectl(kubeconfig: Path, *args: str) -> str:
    """Run the cluster's kubectl; fail with its stderr."""
    done = subprocess.run(
        [str(bin_dir() / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def on_process_node(pod_spec: dict[str, Any]) -> None:
    """Place a pod spec on the process node, where its containers run for real (the only change a
    shipped manifest needs on the local cluster, whose other nodes run nothing)."""
    pod_spec["nodeSelector"] = process_node_selector()
    pod_spec["tolerations"] = process_node_tolerations()
