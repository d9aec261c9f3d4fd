"""Tools against the cluster under test, run as a user would run them, for the integration and the
real-node tiers alike: the cluster's kubectl, and where a bound hostPath claim lives on this machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kubernetes import client

from localcluster.build import bin_dir


def kubectl(kubeconfig: Path, *args: str, timeout: float = 120) -> str:
    """Run the cluster's kubectl; fail with its stderr."""
    done = subprocess.run(
        [str(bin_dir() / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def claim_directory(api: client.ApiClient, namespace: str, claim: str) -> Path | None:
    """Where the bound volume of ``claim`` lives on this machine (the local clusters' volumes are
    hostPath or local PVs); None while the claim is missing or not bound yet."""
    core = client.CoreV1Api(api)
    try:
        volume = core.read_namespaced_persistent_volume_claim(claim, namespace).spec.volume_name
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise
    if not volume:
        return None
    spec = core.read_persistent_volume(volume).spec
    source = spec.host_path or spec.local
    return Path(source.path) if source else None
