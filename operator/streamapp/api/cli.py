"""`streamapp crd` and `streamapp manifests`: print, write or check the generated YAML."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamapp.api.crd import crd_files
from streamapp.api.manifests import manifest_files
from streamapp.api.yamlfiles import KUSTOMIZATION, Files, differences, write

GENERATORS: dict[str, tuple[Callable[[], Files], str]] = {
    "crd": (crd_files, "the CustomResourceDefinitions (crds/)"),
    "manifests": (manifest_files, "the install manifests: namespace, RBAC, operator (manifests/)"),
}


def register(subparsers: Any) -> None:
    """Add the `crd` and `manifests` subcommands."""
    for command, (generate, what) in GENERATORS.items():
        parser = subparsers.add_parser(
            command,
            help=f"print, write or check {what}",
            description=f"Generate {what} from the Python resource model. Without options, print the "
            "objects as one YAML stream (for kubectl apply -f -).",
        )
        target = parser.add_mutually_exclusive_group()
        target.add_argument("--write", metavar="DIR", type=Path, help="write the files into DIR")
        target.add_argument(
            "--check", metavar="DIR", type=Path, help="exit 1 with a diff when DIR differs from the model"
        )
        parser.set_defaults(run=lambda args, generate=generate: run(args, generate()))


def run(args: argparse.Namespace, files: Files) -> int:
    """Print, write or check one set of generated files."""
    if args.write is not None:
        write(args.write, files)
        return 0
    if args.check is not None:
        problems = differences(args.check, files)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print(f"{len(problems)} file(s) in {args.check} differ from the model; regenerate with --write")
            return 1
        return 0
    print("---\n".join(text for name, text in files.items() if name != KUSTOMIZATION), end="")
    return 0
