"""Command-line tools against the cluster under test, run as a user would run them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from localcluster.build import bin_dir


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
