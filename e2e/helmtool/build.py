"""Build a pinned helm from Go modules, once, into ``<cache>/helm/<version>/helm``.

helm's go.mod has no local replaces, but it is still built inside a wrapper module (the control plane's
:mod:`localcluster.build` machinery, reused as is): one code path for every Go product, the same pinned
environment (``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``, ``-trimpath``) and the same progress lines. The
binary is built into a temporary sibling of the cache entry and renamed into place, under a lock, so an
interrupted or concurrent build never leaves a half cache.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from pathlib import Path

from localcluster import build
from localcluster.gotool import cache_base, cache_lock, module_info, swap_in
from localcluster.products import Product

# The newest helm 3 on the module proxy; its go.mod says `go 1.26.0`, so it needs Go >= 1.26.0.
HELM_VERSION = "v3.22.0"
HELM_MODULE = "helm.sh/helm/v3"
_CLIENT_GO = re.compile(r"^\s*k8s\.io/client-go\s+v0\.(\d+)\.", re.MULTILINE)


def cache_root() -> Path:
    """Next to the Kubernetes binaries' cache, so ``STREAMAPP_CACHE`` moves both."""
    return cache_base() / "helm"


def helm_path(version: str = HELM_VERSION) -> Path:
    """Where the pinned helm lives once built."""
    return cache_root() / version / "helm"


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


def ensure_built(force: bool = False, version: str = HELM_VERSION) -> float | None:
    """Build helm unless cached; returns the build's wall seconds, None on a cache hit."""
    with cache_lock(cache_root()):  # two test sessions fixture-building helm at once
        if helm_path(version).is_file() and not force:
            return None
        for leftover in cache_root().glob(".v*-*"):  # killed builds; safe under the lock
            shutil.rmtree(leftover, ignore_errors=True)
        return _build_atomically(version)


def _build_atomically(version: str) -> float:
    """Build into a temporary sibling of the cache entry, then rename it into place."""
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=cache_root()))
    staging.chmod(0o755)  # mkdtemp's 0700 would become the cache entry's mode
    try:
        log = staging / "build.log"
        work = staging / "work"  # wrapper modules; the binary goes to staging/helm
        probe = work / "probe"
        probe.mkdir(parents=True)
        print(f"building helm {version} (log: {log})", flush=True)
        info = module_info(HELM_MODULE, version, probe, log)
        helm = product(Path(info["GoMod"]).read_text(), version)
        build.build_product(helm, work, staging, log)
        seconds = round(time.monotonic() - started, 1)
        report = {"version": version, "seconds": seconds}
        (staging / "build-report.json").write_text(json.dumps(report, indent=2) + "\n")
        shutil.rmtree(work)
        swap_in(staging, helm_path(version).parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return seconds
