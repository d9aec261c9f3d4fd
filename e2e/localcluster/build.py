"""Build the control-plane binaries from Go modules, once, into a versioned cache directory.

Each product (Kubernetes, etcd, kwok) is built in its own wrapper module (see :mod:`gowrapper`) inside a
temporary directory next to the cache entry; the finished ``bin/`` is renamed into place only after every
product built, so an interrupted build never leaves a half cache and a cache hit costs nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from localcluster import components, gowrapper, products, versions
from localcluster.products import Product

GO_ENV_DEFAULTS = {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -trimpath"}
BINARIES = tuple(name for product in products.PRODUCTS for name in product.commands)
PROGRESS_INTERVAL_S = 15.0


@dataclass
class BuildReport:
    """What a cold build cost, so the numbers in e2e/README.md can be re-measured."""

    seconds: float = 0.0
    peak_rss_mib: float = 0.0
    per_product_s: dict[str, float] = field(default_factory=dict)


def cache_root() -> Path:
    """Root of all cached builds; ``STREAMAPP_CACHE`` moves it (for CI caches)."""
    base = os.environ.get("STREAMAPP_CACHE") or str(Path.home() / ".cache" / "streamapp")
    return Path(base) / "k8s"


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


def go_binary() -> str:
    """The Go toolchain to use: ``$GO``, else ``go`` on PATH, else the default install location."""
    explicit = os.environ.get("GO")
    if explicit:
        return explicit
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    if fallback.is_file():
        return str(fallback)
    raise RuntimeError("Go toolchain not found: install Go >= 1.25 or set $GO")


def go_env() -> dict[str, str]:
    """Environment for every go invocation: the pinned settings, plus the caller's GOFLAGS (appended),
    GOPROXY, GOMODCACHE and GOCACHE."""
    env = dict(os.environ)
    env.update(GO_ENV_DEFAULTS)
    if os.environ.get("GOFLAGS"):
        env["GOFLAGS"] = f"{GO_ENV_DEFAULTS['GOFLAGS']} {os.environ['GOFLAGS']}"
    return env


def run_go(args: list[str], cwd: Path, log: Path) -> str:
    """Run a go subcommand, appending its output to the build log; raise with the log tail on failure."""
    with log.open("a") as sink:
        sink.write(f"\n$ go {' '.join(args)}\n")
        sink.flush()
        result = subprocess.run(
            [go_binary(), *args], cwd=cwd, env=go_env(), stdout=subprocess.PIPE, stderr=sink, text=True
        )
        sink.write(result.stdout)
    if result.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        raise RuntimeError(f"go {args[0]} failed in {cwd} (exit {result.returncode}):\n{tail}")
    return result.stdout


def module_info(module: str, version: str, cwd: Path, log: Path) -> dict[str, str]:
    """Download one module and return ``go mod download -json`` metadata (Dir, GoMod, Info)."""
    info: dict[str, str] = json.loads(run_go(["mod", "download", "-json", f"{module}@{version}"], cwd, log))
    return info


def write_wrapper(product: Product, workdir: Path, upstream_go_mod: str) -> None:
    """Write the wrapper go.mod that makes ``product``'s commands buildable (see :mod:`gowrapper`)."""
    replaces = (
        gowrapper.kubernetes_replaces(upstream_go_mod, versions.staging_version())
        if product.replace_staging
        else {}
    )
    text = gowrapper.render(
        module=f"streamapp.dev/e2e/build/{product.name}",
        go=gowrapper.go_directive(upstream_go_mod),
        requires={product.module: product.version},
        tools=product.commands.values(),
        replaces=replaces,
        godebug=gowrapper.godebug_directives(upstream_go_mod),
    )
    (workdir / "go.mod").write_text(text)


def compile_with_progress(product: Product, release_time: str, workdir: Path, out: Path, log: Path) -> None:
    """``go build -v`` the product's commands, printing how many packages are compiled so far."""
    packages = list(product.commands.values())
    total = len(run_go(["list", "-deps", *packages], workdir, log).split())
    ldflags = " ".join(["-s", "-w", *product.ldflags(release_time)])
    # One package: name the binary (etcd's main package path ends in /v3); several: go names each.
    output = str(out / next(iter(product.commands))) if len(packages) == 1 else f"{out}/"
    args = ["build", "-v", f"-tags={product.tags}", f"-ldflags={ldflags}", "-o", output, *packages]
    started = last = time.monotonic()
    done = 0
    with log.open("a") as sink:
        sink.write(f"\n$ go {' '.join(args)}\n")
        proc = subprocess.Popen(
            [go_binary(), *args], cwd=workdir, env=go_env(), stderr=subprocess.PIPE, text=True
        )
        assert proc.stderr is not None
        for line in proc.stderr:
            sink.write(line)
            done += 1
            if time.monotonic() - last >= PROGRESS_INTERVAL_S:
                last = time.monotonic()
                _progress(product.name, min(done, total), total, last - started)
        code = proc.wait()
    if code != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        raise RuntimeError(f"building {product.name} failed (exit {code}):\n{tail}")
    _progress(product.name, total, total, time.monotonic() - started)


def _progress(name: str, done: int, total: int, elapsed: float) -> None:
    """One progress line; ``go build -v`` prints each package it compiles, so lines ≈ packages."""
    percent = 100 * done // max(total, 1)
    print(f"  [{name}] {done}/{total} packages ({percent}%), {elapsed:.0f}s", flush=True)


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
    """Build the pinned binaries unless cached; returns the cost of a build, None on a cache hit."""
    with build_lock():
        if is_built() and not force:
            return None
        _remove_interrupted_builds()
        return _build_atomically()


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
    final = version_dir()
    if final.exists():
        retired = final.with_name(f".{final.name}.old-{os.getpid()}")
        final.rename(retired)
        shutil.rmtree(retired, ignore_errors=True)
    staging.rename(final)
    staging.mkdir()  # the caller's cleanup removes this empty placeholder
