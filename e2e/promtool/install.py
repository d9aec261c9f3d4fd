"""Build the pinned promtool (Prometheus 3.x's rule checker and rule unit-test runner) and Prometheus
server (the autoscaling test's metrics source) once into the shared cache, from the Go module proxy."""

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

# The server from the same module and tags (its scrape configs here are static): built after promtool,
# it finds most of its packages in the Go build cache (measured cold alone: 137 CPU seconds).
SERVER = toolbuild.Tool(
    "prometheus",
    MODULE,
    VERSION,
    "prometheus",
    lambda go_mod: Product(
        "prometheus", MODULE, VERSION, {"prometheus": f"{MODULE}/cmd/prometheus"}, tags="remove_all_sd"
    ),
)


def binary() -> Path:
    return TOOL.path()


def server_binary() -> Path:
    return SERVER.path()


def ensure_installed() -> float | None:
    """Build promtool unless cached; returns seconds spent (None if cached)."""
    return toolbuild.ensure_built(TOOL)


def ensure_server_installed() -> float | None:
    """Build the Prometheus server unless cached; returns seconds spent (None if cached)."""
    return toolbuild.ensure_built(SERVER)


if __name__ == "__main__":
    # `python -m promtool.install [promtool] [prometheus]`: those (both by default), unless cached
    wanted = set(sys.argv[1:]) or {TOOL.name, SERVER.name}
    unknown = wanted - {TOOL.name, SERVER.name}
    if unknown:
        sys.exit(f"unknown: {', '.join(sorted(unknown))} (promtool, prometheus)")
    for tool, build in ((TOOL, ensure_installed), (SERVER, ensure_server_installed)):
        if tool.name not in wanted:
            continue
        took = build()
        print(
            f"{tool.name} {VERSION}: {tool.path()}"
            + (f" (built in {took:.0f} s)" if took is not None else " (cached)")
        )
    sys.exit(0)
