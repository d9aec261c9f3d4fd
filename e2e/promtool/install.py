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
    # `remove_all_sd` leaves out every service-discovery plugin but file and http (the AWS, Azure, GCE,
    # Kubernetes, xDS... SDKs): the rules tests never discover targets, and the build takes 166 s of CPU
    # instead of 412 s (measured cold, one run each, on 2 cores).
    lambda go_mod: Product(
        "promtool", MODULE, VERSION, {"promtool": f"{MODULE}/cmd/promtool"}, tags="remove_all_sd"
    ),
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
