"""Running the Go toolchain for every binary the local cluster builds from Go modules.

One pinned environment (``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``, ``-trimpath``), build output logged to a
file, progress lines, and cache entries replaced in one rename under a lock, shared by the Kubernetes
binaries (:mod:`build`), the volume provisioner (:mod:`provisioner`) and helm, so each cache entry is
built the same way.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from localcluster.products import Product

T = TypeVar("T")

GO_ENV_DEFAULTS = {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod -trimpath"}
PROGRESS_INTERVAL_S = 15.0


def cache_base() -> Path:
    """Root of every cached build (``<base>/k8s``, ``<base>/provisioner``, ...); ``STREAMAPP_CACHE`` moves it."""
    return Path(os.environ.get("STREAMAPP_CACHE") or str(Path.home() / ".cache" / "streamapp"))


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


# The linker drops debug info anyway (-s -w), so the compiler need not write it: about 16% less CPU per
# cold build (helm v3.22.0 alone, one run each: 156 against 132 CPU seconds); the stripped binaries are
# the same size.
GCFLAGS = "-gcflags=all=-dwarf=false"


def compile_with_progress(product: Product, release_time: str, workdir: Path, out: Path, log: Path) -> None:
    """``go build -v`` the product's commands, printing how many packages are compiled so far."""
    packages = list(product.commands.values())
    total = len(run_go(["list", "-deps", *packages], workdir, log).split())
    ldflags = " ".join(["-s", "-w", *product.ldflags(release_time)])
    # One package: name the binary (etcd's main package path ends in /v3); several: go names each.
    output = str(out / next(iter(product.commands))) if len(packages) == 1 else f"{out}/"
    args = ["build", "-v", f"-tags={product.tags}", GCFLAGS, f"-ldflags={ldflags}", "-o", output, *packages]
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
    print(progress_line(name, done, total, elapsed), flush=True)


def progress_line(name: str, done: int, total: int, elapsed: float) -> str:
    """`[kubernetes] 1795/2574 packages (69%), 197s, ~86s left`; pure. The estimate extrapolates the
    rate so far (packages differ in size, so it is rough, and says so with `~`)."""
    percent = 100 * done // max(total, 1)
    line = f"  [{name}] {done}/{total} packages ({percent}%), {elapsed:.0f}s"
    if 0 < done < total:
        line += f", ~{elapsed * (total - done) / done:.0f}s left"
    return line


@contextlib.contextmanager
def cache_lock(directory: Path) -> Iterator[None]:
    """Serialize builds of one cache directory across processes (two test sessions building at once)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(
    root: Path, built: Callable[[], bool], build: Callable[[], T], force: bool = False
) -> T | None:
    """Run ``build`` under the cache's lock unless ``built()`` finds the entry there (None then). Killed
    builds' temporary siblings (``.v*-*``) are removed first: safe, since the lock is held."""
    with cache_lock(root):
        if built() and not force:
            return None
        for leftover in root.glob(".v*-*"):
            shutil.rmtree(leftover, ignore_errors=True)
        return build()


def finish(staging: Path, final: Path, report: Mapping[str, object], stamp: Mapping[str, str]) -> None:
    """Record in a finished build what it cost and what it was built from, drop its wrapper sources
    (``work/``: only the binaries are used) and swap it in as the cache entry ``final``."""
    (staging / "build-report.json").write_text(json.dumps(report, indent=2) + "\n")
    (staging / "stamp.json").write_text(json.dumps(stamp, indent=2) + "\n")
    shutil.rmtree(staging / "work", ignore_errors=True)
    swap_in(staging, final)


def swap_in(staging: Path, final: Path) -> None:
    """Replace the cache entry ``final`` with a finished build in one rename (readers never see half)."""
    if final.exists():
        retired = final.with_name(f".{final.name}.old-{os.getpid()}")
        final.rename(retired)
        shutil.rmtree(retired, ignore_errors=True)
    staging.rename(final)
    staging.mkdir()  # the caller's cleanup removes this empty placeholder
