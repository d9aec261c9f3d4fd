"""The cluster's dynamic volume provisioner: how it is built, and the default StorageClass it serves.

No ready-made command fits: sig-storage-lib-external-provisioner's hostpath example is a separate,
unpublished module (its go.mod replaces the library with ``../..``), so it cannot come from the module
proxy. ``e2e/provisioner/main.go`` is the same idea in ~100 lines on the library's v13 API: a claim of the
class gets a hostPath PV ``<cluster>/volumes/<pv-name>``; reclaiming it removes the directory. It is
compiled in a generated wrapper module (the library, and the ``k8s.io`` client modules at the pinned
Kubernetes' staging tag) into its own cache entry, ``<cache>/provisioner/<library version>/``, so it
neither waits for nor invalidates the Kubernetes binaries.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from localcluster import gotool, gowrapper, versions
from localcluster.products import Product

LIBRARY_MODULE = "sigs.k8s.io/sig-storage-lib-external-provisioner/v13"
CLIENT_MODULES = ("k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go")
BINARY = "hostpath-provisioner"
SOURCE = Path(__file__).resolve().parents[1] / "provisioner" / "main.go"
PROVISIONER_NAME = "streamapp.dev/hostpath"
STORAGE_CLASS = "standard"
PRODUCT = Product("provisioner", LIBRARY_MODULE, versions.PROVISIONER_LIBRARY, {BINARY: "."})


def cache_root() -> Path:
    """Sibling of the Kubernetes binaries' cache, so ``STREAMAPP_CACHE`` moves both."""
    return gotool.cache_base() / "provisioner"


def entry_dir() -> Path:
    """One entry per library version; the stamp inside says what else it was built from."""
    return cache_root() / versions.PROVISIONER_LIBRARY


def binary_path() -> Path:
    """Where the built provisioner lives."""
    return entry_dir() / "bin" / BINARY


def stamp() -> dict[str, str]:
    """What the cached binary was built from; any change (pins or our source) means a rebuild."""
    return {
        "library": versions.PROVISIONER_LIBRARY,
        "client-go": versions.staging_version(),
        "source-sha256": hashlib.sha256(SOURCE.read_bytes()).hexdigest(),
    }


def is_built() -> bool:
    stamp_file = entry_dir() / "stamp.json"
    return binary_path().is_file() and stamp_file.is_file() and json.loads(stamp_file.read_text()) == stamp()


def ensure_built(force: bool = False) -> float | None:
    """Build the provisioner unless cached; returns the build's wall seconds, None on a cache hit."""
    return gotool.build_once(cache_root(), is_built, _build_atomically, force)


def _build_atomically() -> float:
    """Build into a temporary sibling of the cache entry, then rename it into place."""
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{versions.PROVISIONER_LIBRARY}-", dir=cache_root()))
    staging.chmod(0o755)  # mkdtemp's 0700 would become the cache entry's mode
    try:
        log, work, out = staging / "build.log", staging / "work", staging / "bin"
        work.mkdir()
        out.mkdir()
        print(f"building the volume provisioner on {LIBRARY_MODULE} (log: {log})", flush=True)
        _write_module(work, log)
        print(f"  [provisioner] resolving {LIBRARY_MODULE}@{PRODUCT.version} dependencies", flush=True)
        gotool.run_go(["mod", "tidy"], work, log)
        gotool.compile_with_progress(PRODUCT, "", work, out, log)
        seconds = round(time.monotonic() - started, 1)
        gotool.finish(staging, entry_dir(), {"seconds": seconds}, stamp())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return seconds


def _write_module(work: Path, log: Path) -> None:
    """The wrapper module: our main package, the library, and client-go at the pinned staging tag
    (raised from the library's v0.34 by minimal version selection), with client-go's ``go`` line."""
    staging_tag = versions.staging_version()
    client_go = gotool.module_info("k8s.io/client-go", staging_tag, work, log)
    requires = {module: staging_tag for module in CLIENT_MODULES}
    requires[LIBRARY_MODULE] = versions.PROVISIONER_LIBRARY
    text = gowrapper.render(
        module="streamapp.dev/e2e/build/provisioner",
        go=gowrapper.go_directive(Path(client_go["GoMod"]).read_text()),
        requires=requires,
        tools=(),
    )
    (work / "go.mod").write_text(text)
    shutil.copyfile(SOURCE, work / "main.go")


def storage_class() -> dict[str, Any]:
    """The default class: claims without ``storageClassName`` get a volume at once (no waiting for a
    consumer: every node is this machine, so where the volume lives never constrains scheduling)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER_NAME,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }
