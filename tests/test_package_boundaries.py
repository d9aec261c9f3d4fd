"""The packages keep to their floors: the model imports nothing rendered from it or acting on it, the
executor's state engine loads without Spark, and the operator at run time never loads a generator.

Each check imports every module of a package in a fresh interpreter (what this test process has already
loaded cannot hide an import) and lists what came with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from collections import Counter
from pathlib import Path

import pytest

import streamapp

PROBE = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for module in pkgutil.walk_packages(getattr(package, "__path__", []), package.__name__ + "."):
    importlib.import_module(module.name)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_with(package: str) -> set[str]:
    """Every module loaded by importing `package` and each module in it."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, package], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(result.stdout))


def _under(modules: set[str], *prefixes: str) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


CLUSTER = ("kopf", "kubernetes")
SPARK = ("pyspark",)


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        # The types only: nothing written from them, nothing that talks to a cluster or runs Spark.
        (
            "streamapp.api",
            ("streamapp.render", "streamapp.controller", "streamapp.executor", *CLUSTER, *SPARK),
        ),
        # The state engine knows nothing of Kafka or Spark, of no cluster, and not the API model: what it
        # needs (defaults, crash points) is given to it or sits below it.
        (
            "streamapp.executor.state",
            (
                "streamapp.api",
                "streamapp.rebalance",
                "streamapp.controller",
                "confluent_kafka",
                *CLUSTER,
                *SPARK,
            ),
        ),
        # The units every setting shares sit below everything.
        ("streamapp.units", ("streamapp.api", "streamapp.rebalance", *CLUSTER, *SPARK)),
        # The pure engine: no I/O stack at all.
        ("streamapp.rebalance", ("streamapp.controller", "streamapp.executor", *CLUSTER, *SPARK)),
    ],
)
def test_a_package_loads_nothing_above_it(package: str, forbidden: tuple[str, ...]) -> None:
    assert _under(loaded_with(package), *forbidden) == []


def test_the_operator_loads_no_generator() -> None:
    """The controller and its CLI run without `streamapp.render`: the rules they need are their own
    (`controller.permissions`, `controller.admission`); render collects them, not the other way."""
    assert _under(loaded_with("streamapp.controller"), "streamapp.render") == []


def test_the_state_engine_needs_no_other_part_of_the_executor() -> None:
    loaded = loaded_with("streamapp.executor.state")
    others = [m for m in _under(loaded, "streamapp.executor") if not m.startswith("streamapp.executor.state")]
    assert others == ["streamapp.executor"]


def test_the_state_engines_names_are_the_specs() -> None:
    """The names the state engine declares for itself, spelled as the API model spells them."""
    from streamapp.api import member, streamapp
    from streamapp.executor.state import localstate, replica

    assert typing.get_args(streamapp.LocalStoreKind) == localstate.STORE_KINDS
    assert typing.get_args(member.FullRestoreReason) == typing.get_args(replica.FullRestoreReason)


PURE_CONTROLLER = (
    "acknowledgement",
    "admission",
    "children",
    "claims",
    "costreports",
    "decision",
    "intent",
    "intentrebuild",
    "memo",
    "observe",
    "permissions",
    "podrollout",
    "servicejoins",
    "status",
    "supporting",
)


@pytest.mark.parametrize("module", PURE_CONTROLLER)
def test_the_controllers_pure_core_talks_to_no_cluster(module: str) -> None:
    """Decisions apart from acts, the kopf way: these modules compute what to write; the shell
    (`reconcile`, `enact`, `kube`, `handlers`, `loops`, `leader`) writes it."""
    assert _under(loaded_with(f"streamapp.controller.{module}"), *CLUSTER, "streamapp.controller.kube") == []


def test_a_module_name_means_one_thing_across_the_packages() -> None:
    """No two modules share a name: `controller.metrics` and `sim.metrics` (or five `cli`s) read alike
    in a traceback, an import and a search, and meant different things."""
    root = Path(streamapp.__file__).parent
    names = Counter(p.stem for p in root.rglob("*.py") if p.name != "__init__.py")
    assert [name for name, count in names.items() if count > 1] == []
