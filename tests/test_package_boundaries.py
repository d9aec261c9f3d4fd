"""The packages keep to their floors: the model imports nothing rendered from it or acting on it, the
executor's state engine loads without Spark, and the operator at run time never loads a generator.

Each check imports every module of a package in a fresh interpreter (what this test process has already
loaded cannot hide an import) and lists what came with it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import subprocess
import sys
import typing
from collections import Counter
from pathlib import Path

import pytest

import streamapp
from streamapp import cli

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
    "scaling",
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


# Runs the CLI with the extras' packages made unimportable, as on a base install (`pip install
# streamapp-operator`, what the `kubectl streamapp` plugin needs).
WITHOUT_EXTRAS = """
import importlib.abc, json, sys
blocked = set(json.loads(sys.argv[1]))

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
from streamapp.cli import main
try:
    status = main(sys.argv[2:])
except SystemExit as leaving:
    status = leaving.code
print(json.dumps(sorted(m.split(".")[0] for m in sys.modules if m.split(".")[0] in blocked)))
sys.exit(status)
"""


def _extras_packages() -> list[str]:
    """The top-level import names of the `executor` and `plots` extras and what they pull in."""
    from importlib import metadata

    requirements = metadata.requires("streamapp-operator") or []
    extra = [r.split(";")[0] for r in requirements if "extra ==" in r and "dev" not in r.split("extra ==")[1]]
    names = {re.split(r"[<>=!\[ ]", r.strip(), maxsplit=1)[0].lower().replace("_", "-") for r in extra}
    names.discard("streamapp-operator")
    found = {"numpy"}  # what pandas and pyarrow import first
    for module, distributions in metadata.packages_distributions().items():
        if any(d.lower().replace("_", "-") in names for d in distributions):
            found.add(module)
    return sorted(found)


def _without_extras(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, json.dumps(_extras_packages()), *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_base_install_runs_the_plugin_and_lists_every_command() -> None:
    blocked = _extras_packages()
    assert {"pyspark", "pyarrow", "lmdb", "boto3", "confluent_kafka", "matplotlib"} <= set(blocked)
    listed = _without_extras("--help")
    assert listed.returncode == 0, listed.stderr
    for entry in cli.SUBCOMMANDS:
        for name in entry.names:
            assert name in listed.stdout
    status = _without_extras("status", "--help")
    assert status.returncode == 0 and "usage: streamapp status" in status.stdout, status.stderr
    rendered = _without_extras("crd", "--help")
    assert rendered.returncode == 0, rendered.stderr


def test_a_command_whose_extra_is_missing_says_what_to_install() -> None:
    ran = _without_extras("executor", "--member", "0")
    assert ran.returncode == 2
    assert "pip install 'streamapp-operator[executor]'" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_the_command_table_names_what_each_module_registers() -> None:
    for entry in cli.SUBCOMMANDS:
        parser = argparse.ArgumentParser()
        registered = parser.add_subparsers()
        importlib.import_module(entry.module).register(registered)
        assert tuple(registered.choices) == entry.names
