"""Build the control-plane binaries from Go modules, once, into a versioned cache directory.

Each product (Kubernetes, etcd, kwok) is built in its own wrapper module (see :mod:`gowrapper`) inside a
temporary directory next to the cache entry; the finished ``bin/`` is renamed into place only after every
product built, so an interrupted build never leaves a half cache and a cache hit costs nothing.
:func:`ensure_built` also builds the volume provisioner (:mod:`provisioner`), a separate cache entry, so
``make k8s-binaries`` prepares everything ``up`` starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import resource
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from localcluster import components, gotool, gowrapper, products, provisioner, versions
from localcluster.gotool import cache_base, compile_with_progress, module_info, run_go
from localcluster.products import Product

BINARIES = tuple(name for product in products.PRODUCTS for name in product.commands)


@dataclass
class BuildReport:
    """What a cold build cost, so the numbers in e2e/README.md can be re-measured."""

    seconds: float = 0.0
    peak_rss_mib: float = 0.0
    per_product_s: dict[str, float] = field(default_factory=dict)


def cache_root() -> Path:
    """Cache of the Kubernetes binaries; ``STREAMAPP_CACHE`` moves it with every other cached build."""
    return cache_base() / "k8s"


def version_dir(kubernetes: str = versions.KUBERNETES) -> Path:
    """Cache entry of one pinned Kubernetes version."""
    return cache_root() / kubernetes


def bin_dir() -> Path:
    """Where the binaries of the pinned versions live once built."""
    return version_dir() / "bin"


def kwok_stages_dir() -> Path:
    """kwok Stage YAMLs copied from kwok's module at build time (kwok exits without stages)."""
    return version_dir() / "kwok-stages"


def is_built() -> bool:
    """A cache hit: every binary is present and the stamp names exactly the pinned versions."""
    stamp = version_dir() / "versions.json"
    if not stamp.is_file():
        return False
    if json.loads(stamp.read_text()) != versions.as_dict():
        return False
    stages = all((kwok_stages_dir() / stage).is_file() for stage in components.KWOK_STAGE_FILES)
    return stages and all((bin_dir() / name).is_file() for name in BINARIES)


def write_wrapper(product: Product, workdir: Path, upstream_go_mod: str) -> None:
    """Write the wrapper go.mod that makes ``product``'s commands buildable (see :mod:`gowrapper`)."""
    replaces = gowrapper.module_replaces(upstream_go_mod)
    if product.replace_staging:
        replaces |= gowrapper.kubernetes_replaces(upstream_go_mod, versions.staging_version())
    text = gowrapper.render(
        module=f"streamapp.dev/e2e/build/{product.name}",
        go=gowrapper.go_directive(upstream_go_mod),
        requires={product.module: product.version},
        tools=product.commands.values(),
        replaces=replaces,
        godebug=gowrapper.godebug_directives(upstream_go_mod),
    )
    (workdir / "go.mod").write_text(text)


def build_product(product: Product, scratch: Path, out: Path, log: Path) -> None:
    """Download, wrap and compile one product into ``out``."""
    workdir = scratch / product.name
    workdir.mkdir()
    info = module_info(product.module, product.version, workdir, log)
    release_time = json.loads(Path(info["Info"]).read_text())["Time"]
    write_wrapper(product, workdir, Path(info["GoMod"]).read_text())
    print(f"  [{product.name}] resolving {product.module}@{product.version} dependencies", flush=True)
    run_go(["mod", "tidy"], workdir, log)
    compile_with_progress(product, release_time, workdir, out, log)
    if product is products.KWOK:
        copy_kwok_stages(Path(info["Dir"]) / "kustomize" / "stage", out.parent / "kwok-stages")


def build_from_source(
    product: Product,
    info: Mapping[str, str],
    prepare: Callable[[Path, Path], None],
    scratch: Path,
    out: Path,
    log: Path,
) -> None:
    """Compile ``product`` in a writable copy of its module (``info``: `go mod download -json`), which
    is then the main module: its own go.mod and replaces apply, and ``prepare(copy, out)`` may edit it
    first. For a module too large to build whole where a wrapper cannot leave packages out."""
    source = scratch / product.name
    shutil.copytree(info["Dir"], source)
    for path in (source, *source.rglob("*")):  # the module cache's files and dirs are read-only
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    prepare(source, out)
    release_time = json.loads(Path(info["Info"]).read_text())["Time"]
    compile_with_progress(product, release_time, source, out, log)


def copy_kwok_stages(source: Path, target: Path) -> None:
    """Copy the Stage files kwok is started with (module-cache files are read-only; copies are not)."""
    for relative in components.KWOK_STAGE_FILES:
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, destination)


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Serialize concurrent builds (two ``make test`` runs) on one machine."""
    cache_root().mkdir(parents=True, exist_ok=True)
    with (cache_root() / ".build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_built(force: bool = False) -> BuildReport | None:
    """Build the pinned binaries and the provisioner unless cached; returns the cost of a Kubernetes
    build, None on a cache hit (the provisioner reports its own build)."""
    with build_lock():
        report = None
        if force or not is_built():
            _remove_interrupted_builds()
            report = _build_atomically()
    provisioner.ensure_built(force)
    return report


def _remove_interrupted_builds() -> None:
    """Temporary build dirs left by a killed build; safe to remove while holding the build lock."""
    for leftover in cache_root().glob(".v*-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _build_atomically() -> BuildReport:
    """Build into a temporary sibling of the cache entry, then swap it in with one rename."""
    report = BuildReport()
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{versions.KUBERNETES}-", dir=cache_root()))
    try:
        out = staging / "bin"
        out.mkdir()
        log = staging / "build.log"
        for product in products.PRODUCTS:
            print(f"building {product.name} (log: {log})", flush=True)
            product_started = time.monotonic()
            build_product(product, staging, out, log)
            report.per_product_s[product.name] = round(time.monotonic() - product_started, 1)
        report.seconds = round(time.monotonic() - started, 1)
        report.peak_rss_mib = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
        (staging / "build-report.json").write_text(json.dumps(report.__dict__, indent=2) + "\n")
        (staging / "versions.json").write_text(json.dumps(versions.as_dict(), indent=2) + "\n")
        _swap_in(staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return report


def _swap_in(staging: Path) -> None:
    """Replace the cache entry with the finished build, dropping wrapper sources (only bin/ is used)."""
    for product in products.PRODUCTS:
        shutil.rmtree(staging / product.name, ignore_errors=True)
    gotool.swap_in(staging, version_dir())
