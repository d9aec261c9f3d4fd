"""Build KEDA's operator and metrics adapter from Go modules, once, into ``<cache>/keda/<version>/``.

KEDA compiles every scaler it supports into one package (`pkg/scalers`, chosen in
`pkg/scaling/scalers_builder.go`), which pulls in the SDKs of dozens of services: 3,710 packages for
the two commands, more than the whole Kubernetes build. The autoscaling test needs only the Prometheus
and Kafka scalers, so the build runs in a copy of the module (:func:`localcluster.build.build_from_source`)
with every other scaler's file removed and its case cut from the builder's switch: 2,014 packages
(without the Kafka scaler, 1,959 took 218 CPU seconds from an empty build cache on 2 cores). A
ScaledObject naming a left-out trigger fails with KEDA's own "no scaler found for type" error. The CRDs
come from the same module and are copied into the cache entry.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from localcluster import toolbuild
from localcluster.products import Product

MODULE = "github.com/kedacore/keda/v2"
VERSION = "v2.21.0"
# Trigger types kept, and the scaler files that implement them.
TRIGGERS = ("cpu", "memory", "kafka", "prometheus")
SCALER_FILES = ("cpu_memory_scaler.go", "kafka_scaler.go", "prometheus_scaler.go")
# Declared in a left-out scaler's file (azure_queue_scaler.go) and used by the kept ones.
SHARED_DECLARATIONS = """package scalers

// Declared upstream in a scaler file the trimmed build removes.
const externalMetricType = "External"
"""
BUILDER = Path("pkg/scaling/scalers_builder.go")
CRDS = Path("config/crd/bases")
_CASE = re.compile(r'^\s*case "([^"]+)":\s*$')


def keep_triggers(builder: str, triggers: tuple[str, ...] = TRIGGERS) -> str:
    """The builder's source with only ``triggers``' cases left in the switch between its
    ``// TRIGGERS-START`` and ``// TRIGGERS-END`` markers; pure. Raises if the markers or a kept
    trigger are missing (a KEDA version whose layout this does not know)."""
    lines = builder.splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if "// TRIGGERS-START" in line)
        end = next(i for i, line in enumerate(lines) if "// TRIGGERS-END" in line)
    except StopIteration:
        raise ValueError(f"{BUILDER} has no TRIGGERS-START/TRIGGERS-END markers") from None
    kept: list[str] = []
    found: set[str] = set()
    keeping = True
    for line in lines[start:end]:
        case = _CASE.match(line)
        if case is not None:
            keeping = case.group(1) in triggers
            if keeping:
                found.add(case.group(1))
        elif line.strip().startswith("default:"):
            keeping = True
        if keeping:
            kept.append(line)
    missing = set(triggers) - found
    if missing:
        raise ValueError(f"{BUILDER} has no case for {sorted(missing)}")
    return "".join(lines[:start] + kept + lines[end:])


def trim(source: Path, out: Path) -> None:
    """Leave every scaler but :data:`TRIGGERS`' out of the module copy ``source``, and copy KEDA's CRDs
    into the cache entry ``out`` (the test installs them)."""
    scalers = source / "pkg" / "scalers"
    for path in scalers.glob("*_scaler.go"):
        if path.name not in SCALER_FILES:
            path.unlink()
    for path in scalers.glob("*_test.go"):  # they test the removed scalers; never built here
        path.unlink()
    (scalers / "trimmed_shared.go").write_text(SHARED_DECLARATIONS)
    builder = source / BUILDER
    builder.write_text(keep_triggers(builder.read_text()))
    shutil.copytree(source / CRDS, out / "crds")


def product(_upstream_go_mod: str) -> Product:
    """The operator and the adapter, with the version KEDA's Makefile stamps (no git commit: the proxy
    carries none)."""
    return Product(
        "keda",
        MODULE,
        VERSION,
        {"operator": f"{MODULE}/cmd/operator", "adapter": f"{MODULE}/cmd/adapter"},
        ldflag_templates=(f"-X={MODULE}/version.Version={VERSION.removeprefix('v')}",),
    )


TOOL = toolbuild.Tool("keda", MODULE, VERSION, "adapter", product, prepare=trim)


def directory() -> Path:
    """The cache entry: ``operator``, ``adapter`` and ``crds/``."""
    return TOOL.path().parent


def ensure_built(force: bool = False) -> float | None:
    """Build KEDA unless cached; returns the build's wall seconds, None on a cache hit."""
    return toolbuild.ensure_built(TOOL, force)
