"""Build a pinned helm from Go modules, once, into ``<cache>/helm/<version>/helm``.

helm's go.mod has no local replaces, but it is still built inside a wrapper module
(:mod:`localcluster.toolbuild`): one code path for every Go product, the same pinned environment
(``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``, ``-trimpath``) and the same progress lines.
"""

from __future__ import annotations

import re
from pathlib import Path

from localcluster import toolbuild
from localcluster.products import Product

# The newest helm 3 on the module proxy; its go.mod says `go 1.26.0`, so it needs Go >= 1.26.0.
HELM_VERSION = "v3.22.0"
HELM_MODULE = "helm.sh/helm/v3"
_CLIENT_GO = re.compile(r"^\s*k8s\.io/client-go\s+v0\.(\d+)\.", re.MULTILINE)


def helm_path(version: str = HELM_VERSION) -> Path:
    """Where the pinned helm lives once built (next to the Kubernetes binaries' cache, so
    ``STREAMAPP_CACHE`` moves both)."""
    return tool(version).path()


def version_ldflags(upstream_go_mod: str, version: str = HELM_VERSION) -> tuple[str, ...]:
    """helm's Makefile -X flags: the release version (else `helm version` says ``v3.22``) and the
    Kubernetes version `helm template`/`lint` assume, derived from the client-go it builds with
    (client-go v0.Y means Kubernetes 1.Y). The proxy carries no git commit, so that stays empty."""
    match = _CLIENT_GO.search(upstream_go_mod)
    if match is None:
        raise ValueError("helm's go.mod requires no k8s.io/client-go v0.Y.Z")
    minor = match.group(1)
    flags = [f"-X {HELM_MODULE}/internal/version.version={version}"]
    flags += [f"-X {HELM_MODULE}/internal/version.metadata="]
    for package in ("pkg/lint/rules", "pkg/chartutil"):
        flags += [f"-X {HELM_MODULE}/{package}.k8sVersionMajor=1"]
        flags += [f"-X {HELM_MODULE}/{package}.k8sVersionMinor={minor}"]
    return tuple(flags)


def product(upstream_go_mod: str, version: str = HELM_VERSION) -> Product:
    """helm as a :class:`Product` of the control-plane build (one command, no replaces)."""
    return Product(
        "helm",
        HELM_MODULE,
        version,
        {"helm": f"{HELM_MODULE}/cmd/helm"},
        ldflag_templates=version_ldflags(upstream_go_mod, version),
    )


def tool(version: str = HELM_VERSION) -> toolbuild.Tool:
    """helm as a cached single-command build."""
    return toolbuild.Tool("helm", HELM_MODULE, version, "helm", lambda go_mod: product(go_mod, version))


def ensure_built(force: bool = False, version: str = HELM_VERSION) -> float | None:
    """Build helm unless cached; returns the build's wall seconds, None on a cache hit."""
    return toolbuild.ensure_built(tool(version), force)
