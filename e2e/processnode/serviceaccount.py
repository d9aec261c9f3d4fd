"""The pod's ServiceAccount credentials, handed to its processes as a kubeconfig.

A kubelet mounts a projected token at /var/run/secrets/kubernetes.io/serviceaccount; the process node
has no mount namespaces, so it writes the same files (token, ca.crt, namespace) into the pod's work
directory plus a kubeconfig that points at them, and sets ``KUBECONFIG``. The token comes from the
TokenRequest API bound to the pod (the Node authorizer allows exactly that for pods on this node), so
the processes act with the pod's RBAC identity, not the node's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from processnode.kube import NodeClient

Json = dict[str, Any]
TOKEN_SECONDS = 24 * 3600


def wants_token(pod: Json) -> bool:
    """Same switch as the kubelet: ``automountServiceAccountToken: false`` opts out."""
    return pod["spec"].get("automountServiceAccountToken", True) is not False


def write_credentials(api: NodeClient, pod: Json, directory: Path) -> dict[str, str]:
    """Request a pod-bound token, write token/ca.crt/namespace/kubeconfig; return env for the pod."""
    meta = pod["metadata"]
    account = pod["spec"].get("serviceAccountName") or "default"
    token = api.request_token(meta["namespace"], account, meta["name"], meta["uid"], TOKEN_SECONDS)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "token").chmod(0o600)
    (directory / "namespace").write_text(meta["namespace"])
    (directory / "ca.crt").write_bytes(Path(api.ca_file).read_bytes())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "cluster", "cluster": {"server": api.server, "certificate-authority": "ca.crt"}}
        ],
        "users": [{"name": account, "user": {"tokenFile": "token"}}],
        "contexts": [
            {
                "name": "pod",
                "context": {"cluster": "cluster", "user": account, "namespace": meta["namespace"]},
            }
        ],
        "current-context": "pod",
    }
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
    return {"KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": meta["namespace"]}
