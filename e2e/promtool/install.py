"""Build the pinned promtool (Prometheus 3.x's rule checker and rule unit-test runner) once into the
shared cache, from the Go module proxy."""

from __future__ import annotations

import sys
from pathlib import Path

from localcluster import toolbuild
from localcluster.products import Product

MODULE = "github.com/prometheus/prometheus"
# Prometheus v3.x is published to the module proxy as v0.3xx.y (its Go module never took v3).
VERSION = "v0.316.0"
TOOL = toolbuild.Tool(
    "promtool",
    MODULE,
    VERSION,
    "promtool",
    lambda go_mod: Product("promtool", MODULE, VERSION, {"promtool": f"{MODULE}/cmd/promtool"}),
)


def binary() -> Path:
    return TOOL.path()


def ensure_installed() -> float | None:
    """Build promtool unless cached; returns seconds spent (None if cached)."""
    return toolbuild.ensure_built(TOOL)


if __name__ == "__main__":
    took = ensure_installed()
    print(
        f"promtool {VERSION}: {binary()}" + (f" (built in {took:.0f} s)" if took is not None else " (cached)")
    )
    sys.exit(0)
