"""kubeconfig files for the admin user and each component, all pointing at the local apiserver."""

from __future__ import annotations

from pathlib import Path

import yaml

from localcluster.certs import KeyPair

CLUSTER_NAME = "streamapp-local"


def render(server: str, ca_cert: Path, client: KeyPair, user: str) -> str:
    """One-context kubeconfig that authenticates with a client certificate (paths, not inline data)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": CLUSTER_NAME, "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
            }
        ],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": CLUSTER_NAME,
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(path: Path, server: str, ca_cert: Path, client: KeyPair, user: str) -> Path:
    """Write a kubeconfig readable only by its owner (it names a private key)."""
    path.write_text(render(server, ca_cert, client, user))
    path.chmod(0o600)
    return path
