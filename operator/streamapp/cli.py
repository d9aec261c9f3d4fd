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
from importlib import metadata

# Modules that expose `register(subparsers: argparse._SubParsersAction) -> None`.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "streamapp.controller.operatorcli",
    "streamapp.sim.simulatecli",
    "streamapp.executor.dataplanecli",
    "streamapp.executor.agent",
    "streamapp.executor.sparkk8s",
    "streamapp.executor.io.read",
    "streamapp.render.rendercli",
    "streamapp.appstatus",
)


def version() -> str:
    """The installed distribution's version (what the image tag and `--version` report)."""
    try:
        return metadata.version("streamapp-operator")
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
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run the chosen subcommand; its return value is the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
