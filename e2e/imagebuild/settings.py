"""What the image is made of and where its caches live; everything a cache key depends on is here."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMAGES_DIR = REPO / "images"
CONTAINERFILE = IMAGES_DIR / "Containerfile"
PYPROJECT = REPO / "pyproject.toml"

IMAGE_NAME = "streamapp"
BASE_IMAGE_NAME = "localhost/streamapp-base"
# Labels on the final image: the content hash decides whether a build is needed at all.
HASH_LABEL = "io.streamapp.content-hash"
BASE_LABEL = "io.streamapp.base-key"

# The uid the operator Deployment runs as (manifests.py: runAsUser 65532); the image's only user.
RUNTIME_UID = 65532

SUITE = "bookworm"
# Debian packages of the base rootfs. python3 is 3.11 on bookworm; python3-venv brings ensurepip (the
# image installs into a venv, never into the system Python); tini is a proper PID 1 (signal
# forwarding, zombie reaping for the JVM that PySpark spawns).
# usr-is-merged satisfies init-system-helpers' "usrmerge | usr-is-merged" (the rootfs is merged-/usr
# already); left to apt, the first alternative drags in Perl (~50 MB).
BASE_PACKAGES = (
    "python3",
    "python3-venv",
    "openjdk-17-jre-headless",
    "ca-certificates",
    "tini",
    "usr-is-merged",
)
# `essential` = only Essential:yes packages plus the ones above: no apt in the image (nothing installs
# packages at run time), no docs, manuals or translations, no recommends.
MMDEBSTRAP_OPTIONS = (
    "--variant=essential",
    "--format=tar",
    '--aptopt=APT::Install-Recommends "false"',
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-exclude=/usr/share/lintian/*",
    # openjdk's postinst registers its man page with update-alternatives, which fails when the
    # directory is missing (path-exclude above keeps it from being created); removed again at the end.
    '--setup-hook=mkdir -p "$1"/usr/share/man/man1',
    '--customize-hook=rm -rf "$1"/usr/share/man "$1"/var/log/* "$1"/var/cache/debconf/*-old "$1"/var/lib/dpkg/*-old',
)
# Bump when the meaning of the inputs above changes without their text changing.
BASE_RECIPE_VERSION = "1"


def version() -> str:
    """The project version from pyproject.toml: the image tag, equal to manifests.py's IMAGE tag."""
    with PYPROJECT.open("rb") as handle:
        project = tomllib.load(handle)["project"]
    found: str = project["version"]
    return found


def dependencies() -> list[str]:
    """The runtime requirements, the base and the `executor` extra (the image runs the operator and the
    executors; no plots, no dev tools): installed in their own layer, before the sources. The
    Containerfile reads the same two lists from pyproject.toml."""
    with PYPROJECT.open("rb") as handle:
        project = tomllib.load(handle)["project"]
    found: list[str] = [*project["dependencies"], *project["optional-dependencies"]["executor"]]
    return found


def image_tag() -> str:
    """``streamapp:<version>``, what the operator Deployment names (podman stores it under localhost/)."""
    return f"{IMAGE_NAME}:{version()}"


def cache_root() -> Path:
    """Cache of base tarballs; ``STREAMAPP_CACHE`` moves it, as it does for the k8s binaries."""
    base = os.environ.get("STREAMAPP_CACHE") or str(Path.home() / ".cache" / "streamapp")
    return Path(base) / "image"
