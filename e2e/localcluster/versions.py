"""Pinned versions of every binary of the local control plane.

Kubernetes 1.35 (go.mod: ``go 1.25``) builds with Go 1.25 and 1.26, so a CI machine's Go need not be
the newest; 1.36 would need Go >= 1.26.0. Its ``build/dependencies.yaml`` names etcd 3.6.6, so etcd is
pinned to exactly that release. kwok 0.7.0 is the newest release that still builds with Go 1.24.

The volume provisioner is our own small command (``e2e/provisioner``) on sig-storage-lib-external-provisioner
v13.0.0, the newest major on the proxy (go.mod ``go 1.24.0``, built for client-go v0.34), compiled
against the client-go of the pinned Kubernetes. Its pins live in its own cache stamp
(:func:`localcluster.provisioner.stamp`), not in :func:`as_dict`, so they never invalidate the
Kubernetes binaries. The real node's parts have their own stamp (:func:`realnode.build.stamp`) for the
same reason.
"""

from __future__ import annotations

KUBERNETES = "v1.35.4"
ETCD = "v3.6.6"
KWOK = "v0.7.0"
PROVISIONER_LIBRARY = "v13.0.0"
# The real node's runtime (e2e/realnode): containerd 2.2 is the newest minor whose go.mod still accepts
# Go 1.25 (2.3 wants 1.26.8) and speaks the CRI v1 the 1.35 kubelet requires; CNI plugins 1.9 likewise.
CONTAINERD = "v2.2.9"
CNI_PLUGINS = "v1.9.1"


def staging_version(kubernetes: str = KUBERNETES) -> str:
    """Published tag of the ``k8s.io/*`` staging modules that ship with a Kubernetes release.

    Kubernetes ``v1.Y.Z`` publishes its staging repositories (client-go, apiserver, ...) as ``v0.Y.Z``.
    """
    major, minor, patch = kubernetes.removeprefix("v").split(".")
    if major != "1":
        raise ValueError(f"unexpected Kubernetes major version in {kubernetes!r}")
    return f"v0.{minor}.{patch}"


def as_dict() -> dict[str, str]:
    """The pins as written into a cache entry's stamp, so a changed pin invalidates the cache."""
    return {"kubernetes": KUBERNETES, "etcd": ETCD, "kwok": KWOK}
