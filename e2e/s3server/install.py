"""Build the pinned S3 server (SeaweedFS's `weed`) once into the shared cache, from the Go module proxy."""

from __future__ import annotations

from pathlib import Path

from localcluster import toolbuild
from localcluster.products import Product
from s3server import build

MODULE = "github.com/seaweedfs/seaweedfs"
# A pseudo-version (SeaweedFS publishes no module tags) from after the fix of its concurrent
# `If-None-Match: *` check; `weed version` reports 4.53.
VERSION = "v0.0.0-20261109003541-7506e5f91cd6"
# The cache entry is `<cache>/seaweedfs-s3/<version>/weed`, not `seaweedfs/`: that one holds the whole
# `weed` of before the trim (build.py), which a cache hit must not pick up. A change to the trim that
# changes what the binary can do renames it again.
TOOL = toolbuild.Tool(
    "seaweedfs-s3",
    MODULE,
    VERSION,
    "weed",
    lambda go_mod: Product("seaweedfs", MODULE, VERSION, {"weed": f"{MODULE}/weed"}),
    prepare=build.trim,
)


def server_binary() -> Path:
    return TOOL.path()


def ensure_installed() -> float | None:
    """Build the server unless cached; returns seconds spent (None if cached)."""
    return toolbuild.ensure_built(TOOL)
