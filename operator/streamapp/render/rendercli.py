"""`streamapp crd`, `streamapp manifests`, `streamapp chart` and `streamapp api-docs`: print, write or check
the generated files;
`streamapp crd --apply` also installs the CRDs (the Helm chart's CRD upgrade Job runs it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamapp.render.apidocs import api_files
from streamapp.render.chart import chart_files
from streamapp.render.crd import crd_files, crds
from streamapp.render.manifests import manifest_files
from streamapp.render.monitoring import monitoring_files
from streamapp.render.yamlfiles import KUSTOMIZATION, Files, differences, write

# command: (generator, what it generates, whether its files print as one YAML stream)
GENERATORS: dict[str, tuple[Callable[[], Files], str, bool]] = {
    "crd": (crd_files, "the CustomResourceDefinitions (crds/)", True),
    "manifests": (manifest_files, "the install manifests: namespace, RBAC, operator (manifests/)", True),
    "chart": (chart_files, "the Helm chart (charts/streamapp-operator/)", False),
    "api-docs": (api_files, "the API reference (docs/api.md)", False),
    "monitoring": (
        monitoring_files,
        "the PrometheusRule and Grafana dashboard (manifests/monitoring/)",
        False,
    ),
}
FIELD_MANAGER = "streamapp"
APPLY_PATCH = "application/apply-patch+yaml"


def register(subparsers: Any) -> None:
    """Add one subcommand per generator."""
    for command, (generate, what, stream) in GENERATORS.items():
        printing = " Without options, print the objects as one YAML stream (for kubectl apply -f -)."
        parser = subparsers.add_parser(
            command,
            help=f"{'print, ' if stream else ''}write or check {what}",
            description=f"Generate {what} from the Python resource model.{printing if stream else ''}",
        )
        # A chart or a document is not objects: there is nothing to print.
        target = parser.add_mutually_exclusive_group(required=not stream)
        target.add_argument("--write", metavar="DIR", type=Path, help="write the files into DIR")
        target.add_argument(
            "--check", metavar="DIR", type=Path, help="exit 1 with a diff when DIR differs from the model"
        )
        if command == "crd":
            target.add_argument(
                "--apply",
                action="store_true",
                help="server-side apply the CRDs to the cluster (in-cluster login, else $KUBECONFIG)",
            )
        parser.set_defaults(run=lambda args, generate=generate: run(args, generate()))


def run(args: argparse.Namespace, files: Files) -> int:
    """Print, write, check or apply one set of generated files."""
    if getattr(args, "apply", False):
        return apply_crds()
    if args.write is not None:
        for name in files:  # the chart has subdirectories (crds/, templates/)
            (args.write / name).parent.mkdir(parents=True, exist_ok=True)
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
    # Files in subdirectories are optional additions (manifests/optional/), not part of the stream.
    print(
        "---\n".join(text for name, text in files.items() if _streamed(name)),
        end="",
    )
    return 0


def apply_crds() -> int:
    """Server-side apply of the CRDs this package generates, taking over fields from other managers.

    This is how a cluster gets the CRDs of a new version where Helm will not upgrade them: the operator
    image has this package and the kubernetes client, but no kubectl.
    """
    from kubernetes import client, config  # only --apply needs a cluster client

    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    with client.ApiClient() as api:
        extensions = client.ApiextensionsV1Api(api)
        for crd in crds():
            name = crd["metadata"]["name"]
            extensions.patch_custom_resource_definition(
                name, crd, field_manager=FIELD_MANAGER, force=True, _content_type=APPLY_PATCH
            )
            print(f"customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied", flush=True)
    return 0


def _streamed(name: str) -> bool:
    """Whether a generated file belongs in the printed stream: YAML objects at the top of the directory,
    not the kustomization listing them, nor optional additions in subdirectories (manifests/optional/)."""
    return name.endswith(".yaml") and name != KUSTOMIZATION and "/" not in name
