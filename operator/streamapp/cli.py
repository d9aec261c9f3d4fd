"""The `streamapp` console script.

Each subcommand lives next to the concept it drives (the simulator, the data generator, the operator,
the executor) and registers itself here through a `register(subparsers)` function, so this module stays
a table of contents rather than a place where logic accumulates.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

DISTRIBUTION = "streamapp-operator"


@dataclass(frozen=True)
class Subcommands:
    """A module exposing `register(subparsers)`, the commands it registers and the optional
    dependencies (`pyproject.toml` extra) it imports. Without them installed the commands are still
    listed, and running one says what to install instead of failing on an import (the base install is
    the light one the `kubectl streamapp` plugin needs)."""

    module: str
    names: tuple[str, ...]
    extra: str | None = None


SUBCOMMANDS: tuple[Subcommands, ...] = (
    Subcommands("streamapp.controller.operatorcli", ("operator",)),
    Subcommands("streamapp.sim.simulatecli", ("simulate",)),
    Subcommands("streamapp.executor.dataplanecli", ("generate", "dataplane"), "executor"),
    Subcommands("streamapp.executor.agent", ("executor",), "executor"),
    Subcommands("streamapp.executor.sparkk8s", ("spark-executor",), "executor"),
    Subcommands("streamapp.executor.io.read", ("read",), "executor"),
    Subcommands("streamapp.render.rendercli", ("crd", "manifests", "chart", "api-docs", "monitoring")),
    Subcommands("streamapp.appstatus", ("status",)),
)


def version() -> str:
    """The installed distribution's version (what the image tag and `--version` report)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="streamapp",
        description="StreamApp Operator: stateful PySpark stream processing with cooperative rebalancing.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for entry in SUBCOMMANDS:
        try:
            module = importlib.import_module(entry.module)
        except ModuleNotFoundError as error:
            if entry.extra is None or (error.name or "").partition(".")[0] == "streamapp":
                raise  # not a missing extra: a fault of this package's own
            for name in entry.names:
                _needs_extra(subparsers, name, entry.extra, error)
            continue
        module.register(subparsers)
    return parser


def _needs_extra(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    extra: str,
    error: ModuleNotFoundError,
) -> None:
    """A command whose dependencies are not installed: listed, and explains itself when run."""
    hint = f"pip install '{DISTRIBUTION}[{extra}]'"
    # no option prefix: whatever follows is taken, so the answer is the hint, not a usage error
    command = subparsers.add_parser(
        name, help=f"(needs the {extra} extra: {hint})", add_help=False, prefix_chars="\0"
    )
    command.add_argument("rest", nargs="*")

    def run(args: argparse.Namespace) -> int:
        print(f"streamapp {name}: {error.name} is not installed; {hint}", file=sys.stderr)
        return 2

    command.set_defaults(run=run)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run the chosen subcommand; its return value is the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
