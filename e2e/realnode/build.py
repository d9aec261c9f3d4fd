"""Build the real node's binaries from Go modules, once, into their own cache entry.

``<cache>/node/<stamp>/bin`` holds the kubelet, kube-proxy, containerd, its runc shim and ``ctr``;
``cni/`` holds the CNI plugins (the kubelet's runtime looks them up in one directory). The entry is
separate from the control plane's, so the fast tiers neither wait for nor invalidate it; it is built in a
temporary sibling and renamed into place under a lock, as every other cached build here.
"""

from __future__ import annotations

import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

from localcluster import build, gotool, products, versions

CNI_PRODUCT = products.CNI_PLUGINS


def stamp() -> dict[str, str]:
    """The pins the node's binaries are built from; any change means a rebuild."""
    return {
        "kubernetes": versions.KUBERNETES,
        "containerd": versions.CONTAINERD,
        "cni-plugins": versions.CNI_PLUGINS,
    }


def cache_root() -> Path:
    return gotool.cache_base() / "node"


def entry_dir() -> Path:
    """One entry per combination of pins, named after them."""
    return cache_root() / f"{versions.KUBERNETES}-containerd-{versions.CONTAINERD}-cni-{versions.CNI_PLUGINS}"


def bin_dir() -> Path:
    return entry_dir() / "bin"


def cni_dir() -> Path:
    return entry_dir() / "cni"


def is_built() -> bool:
    """A cache hit: every binary present and the stamp naming exactly the pins."""
    stamp_file = entry_dir() / "stamp.json"
    if not stamp_file.is_file() or json.loads(stamp_file.read_text()) != stamp():
        return False
    wanted = [
        bin_dir() / name
        for product in products.NODE_PRODUCTS
        if product is not CNI_PRODUCT
        for name in product.commands
    ]
    wanted += [cni_dir() / name for name in CNI_PRODUCT.commands]
    return all(path.is_file() for path in wanted)


def ensure_built(force: bool = False) -> dict[str, float] | None:
    """Build the node's binaries unless cached; returns seconds per product, None on a cache hit."""
    return gotool.build_once(cache_root(), is_built, _build_atomically, force)


def _build_atomically() -> dict[str, float]:
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{versions.KUBERNETES}-", dir=cache_root()))
    staging.chmod(0o755)  # mkdtemp's 0700 would become the cache entry's mode
    seconds: dict[str, float] = {}
    try:
        log, work = staging / "build.log", staging / "work"
        work.mkdir()
        for product in products.NODE_PRODUCTS:
            out = staging / ("cni" if product is CNI_PRODUCT else "bin")
            out.mkdir(exist_ok=True)
            print(f"building {product.name} {product.version} for the real node (log: {log})", flush=True)
            product_started = time.monotonic()
            build.build_product(product, work, out, log)
            seconds[product.name] = round(time.monotonic() - product_started, 1)
        seconds["total"] = round(time.monotonic() - started, 1)
        peak = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
        gotool.finish(staging, entry_dir(), {"seconds": seconds, "peak_rss_mib": peak}, stamp())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return seconds


if __name__ == "__main__":
    print(json.dumps(ensure_built(), indent=2))
