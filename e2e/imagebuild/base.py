"""The base image: a minimal Debian rootfs from ``mmdebstrap``, cached as a tarball, imported into podman.

The tarball is keyed by a hash of everything that determines it (suite, packages, mirror lines,
mmdebstrap options, recipe version), so a warm machine never runs mmdebstrap again and a changed input
builds a new entry next to the old one. mmdebstrap writes to a temporary sibling that is renamed into
place only on success, under a file lock: an interrupted build never leaves a half-written cache entry
(the next build removes its leftovers).

Security updates published after the tarball was made are not picked up until an input changes or
``build --refresh-base`` is used.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from imagebuild import aptsources, podman, settings
from imagebuild.progress import run_logged, say

PARTIAL_MARK = ".partial-"


def recipe() -> dict[str, object]:
    """Every input of the base rootfs, in a stable form (hashed for the cache key)."""
    return {
        "recipe": settings.BASE_RECIPE_VERSION,
        "suite": settings.SUITE,
        "packages": sorted(settings.BASE_PACKAGES),
        "options": list(settings.MMDEBSTRAP_OPTIONS),
        "mirrors": aptsources.host_mirror_lines(settings.SUITE),
    }


def key() -> str:
    """Content hash of :func:`recipe`; names the tarball and tags the imported image."""
    encoded = json.dumps(recipe(), sort_keys=True).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def tarball(base_key: str | None = None) -> Path:
    """``<cache>/image/base-<key>.tar``."""
    return settings.cache_root() / f"base-{base_key or key()}.tar"


def image_reference(base_key: str | None = None) -> str:
    """The base as a local podman image: ``localhost/streamapp-base:<key>``."""
    return f"{settings.BASE_IMAGE_NAME}:{base_key or key()}"


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Serialize builds on this machine (a test session and ``make image`` may race)."""
    root = settings.cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".build.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_partials() -> None:
    """Tarballs of interrupted builds; only called while holding the build lock."""
    for leftover in settings.cache_root().glob(f"base-*.tar{PARTIAL_MARK}*"):
        say(f"removing leftover of an interrupted build: {leftover.name}")
        leftover.unlink()


def build_tarball(target: Path) -> float:
    """Run mmdebstrap into a temporary sibling of ``target`` and rename it into place; returns seconds."""
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise podman.ToolMissing("mmdebstrap is not installed (apt-get install mmdebstrap)")
    partial = target.with_name(f"{target.name}{PARTIAL_MARK}{os.getpid()}")
    command = [
        mmdebstrap,
        *settings.MMDEBSTRAP_OPTIONS,
        f"--include={','.join(settings.BASE_PACKAGES)}",
        settings.SUITE,
        str(partial),
        *aptsources.host_mirror_lines(settings.SUITE),
    ]
    say(f"building the base rootfs with mmdebstrap ({', '.join(settings.BASE_PACKAGES)}), takes minutes")
    try:
        seconds = run_logged("mmdebstrap", command, settings.cache_root() / "logs" / f"{target.stem}.log")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return seconds


def ensure_base(refresh: bool = False) -> tuple[str, float]:
    """The base image reference, building the tarball and importing it when missing; returns seconds spent.

    Call with :func:`build_lock` held.
    """
    base_key = key()
    reference = image_reference(base_key)
    target = tarball(base_key)
    spent = 0.0
    if refresh:
        target.unlink(missing_ok=True)
        podman.run(["image", "rm", "--force", reference], check=False)
    _remove_partials()
    if not target.is_file():
        spent += build_tarball(target)
    else:
        say(f"base rootfs cached: {target}")
    if not podman.image_exists(reference):
        say(f"importing {target.name} as {reference}")
        log = settings.cache_root() / "logs" / f"{target.stem}.log"
        spent += run_logged(
            "podman import",
            podman.command(
                "import", "--change", f"LABEL {settings.BASE_LABEL}={base_key}", str(target), reference
            ),
            log,
        )
    return reference, spent
