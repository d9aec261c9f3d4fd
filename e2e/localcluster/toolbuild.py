"""Build one pinned Go command, once, into ``<cache>/<tool>/<version>/<binary>``.

Used for the tools that are not part of the control plane (helm, the SeaweedFS S3 server): the same
machinery as the control-plane build (:func:`localcluster.build.build_product`: a wrapper module, the
pinned environment, progress lines), one cache entry per tool and version. The binary is built into a
temporary sibling of the cache entry and renamed into place under a lock, so an interrupted or
concurrent build never leaves a half cache.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcluster import build
from localcluster.gotool import build_once, cache_base, module_info, swap_in
from localcluster.products import Product


@dataclass(frozen=True)
class Tool:
    """A pinned Go module whose commands are cached beside ``binary``; ``product`` builds its
    :class:`Product` from the upstream go.mod (ldflags can depend on it).

    With ``prepare``, the module is built from an editable copy of its source instead of a wrapper
    module: ``prepare(source, out)`` may change the copy (leave packages out) and copy files the tool
    needs at run time into the cache entry ``out``.
    """

    name: str
    module: str
    version: str
    binary: str
    product: Callable[[str], Product]
    prepare: Callable[[Path, Path], None] | None = None

    def cache_root(self) -> Path:
        return cache_base() / self.name

    def path(self) -> Path:
        """Where the binary lives once built."""
        return self.cache_root() / self.version / self.binary


def ensure_built(tool: Tool, force: bool = False) -> float | None:
    """Build ``tool`` unless cached; returns the build's wall seconds, None on a cache hit."""
    # Under a lock: two test sessions may fixture-build it at once.
    return build_once(tool.cache_root(), tool.path().is_file, lambda: _build_atomically(tool), force)


def _build_atomically(tool: Tool) -> float:
    """Build into a temporary sibling of the cache entry, then rename it into place."""
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f".{tool.version}-", dir=tool.cache_root()))
    staging.chmod(0o755)  # mkdtemp's 0700 would become the cache entry's mode
    try:
        log = staging / "build.log"
        work = staging / "work"  # wrapper modules; the binary goes to staging/<binary>
        probe = work / "probe"
        probe.mkdir(parents=True)
        print(f"building {tool.name} {tool.version} (log: {log})", flush=True)
        info = module_info(tool.module, tool.version, probe, log)
        product = tool.product(Path(info["GoMod"]).read_text())
        if tool.prepare is None:
            build.build_product(product, work, staging, log)
        else:
            build.build_from_source(product, info, tool.prepare, work, staging, log)
        seconds = round(time.monotonic() - started, 1)
        report = {"version": tool.version, "seconds": seconds}
        (staging / "build-report.json").write_text(json.dumps(report, indent=2) + "\n")
        shutil.rmtree(work)
        swap_in(staging, tool.path().parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return seconds


def main(tool: Tool, package: str, argv: list[str] | None = None) -> int:
    """``python -m <package> build [--force]``: build ``tool`` unless cached, say where it is."""
    root = argparse.ArgumentParser(prog=f"python -m {package}")
    sub = root.add_subparsers(dest="command", required=True)
    build_cmd = sub.add_parser("build", help=f"build {tool.name} {tool.version} from Go modules (cached)")
    build_cmd.add_argument("--force", action="store_true", help="rebuild even when cached")
    args = root.parse_args(argv)
    seconds = ensure_built(tool, args.force)
    where = tool.path().parent
    print(
        f"{tool.name} cached in {where}"
        if seconds is None
        else f"built {tool.name} into {where} in {seconds:.0f}s"
    )
    return 0
