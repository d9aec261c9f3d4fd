"""The CustomResourceDefinitions, generated from the models (crds/ is this module's output).

Helm never upgrades CRDs, so crds/ is applied on its own with `kubectl apply`; a test fails when the
files there differ from what this module generates.
"""

from __future__ import annotations

from typing import Any

from streamapp.api.fields import model_rules
from streamapp.api.member import StreamAppMember
from streamapp.api.meta import GROUP, VERSION, Resource
from streamapp.api.schema import describe, model_schema
from streamapp.api.streamapp import StreamApp
from streamapp.render.yamlfiles import Files, render

CRD_KUSTOMIZATION = "Kustomization"

# `kubectl get streaming` lists apps and members together. A category must not equal any resource's
# name: kubectl expands categories first, so a category "streamapp" turned `kubectl get streamapp x`
# into a request for two resource types ("you must specify only one resource").
CATEGORIES = ["streaming"]


def _column(name: str, path: str, type_: str, description: str, priority: int = 0) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": type_, "jsonPath": path, "description": description}
    if priority:
        column["priority"] = priority
    return column


_AGE = _column("Age", ".metadata.creationTimestamp", "date", "Time since creation.")

STREAMAPP_COLUMNS = [
    _column("Replicas", ".spec.replicas", "integer", "Desired executors."),
    _column("Ready", ".status.readyReplicas", "integer", "Members whose pod is Ready."),
    _column(
        "Status",
        '.status.conditions[?(@.type=="Ready")].reason',
        "string",
        "Why the app is Ready or not: the Ready condition's reason (e.g. AllTasksProcessed, InvalidSpec).",
    ),
    _column("Partitions", ".spec.partitions", "integer", "Tasks."),
    _column("Warming", ".status.tasks.warming", "integer", "Warmup copies catching up."),
    _column("Unassigned", ".status.tasks.unassigned", "integer", "Tasks nobody processes or holds."),
    _column("Generation", ".status.generation", "integer", "Assignment generation."),
    _column("Input Lag", ".status.inputLag", "integer", "Source records not yet processed."),
    _AGE,
]
MEMBER_COLUMNS = [
    _column("App", ".spec.app", "string", "The StreamApp."),
    _column("Member", ".spec.memberId", "integer", "Static member id."),
    _column("Generation", ".spec.generation", "integer", "Target assignment generation."),
    _column("Observed", ".status.observedGeneration", "integer", "Generation the executor has applied."),
    # The API server prints only the first match of a `[*]` path, so the task sets are shown through
    # the range strings the operator writes next to the lists.
    _column("Active", ".spec.activeTasks", "string", "Tasks to process.", priority=1),
    _column("Revoking", ".spec.revokingTasks", "string", "Tasks being let go of.", priority=1),
    _column("Standby", ".spec.standbyTasks", "string", "Tasks kept as hot copies.", priority=1),
    _column("Warmup", ".spec.warmupTasks", "string", "Tasks warming up for a handoff.", priority=1),
    _AGE,
]
SCALE = {
    "specReplicasPath": ".spec.replicas",
    "statusReplicasPath": ".status.replicas",
    "labelSelectorPath": ".status.selector",
}


def crd_name(resource: type[Resource[Any, Any]]) -> str:
    """`<plural>.<group>`, the CRD's object name."""
    return f"{resource.PLURAL}.{GROUP}"


def custom_resource_definition(
    resource: type[Resource[Any, Any]], columns: list[dict[str, Any]], scale: bool
) -> dict[str, Any]:
    """The CRD of one resource: one served and stored version, status (and optionally scale) subresource."""
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = SCALE
    root: dict[str, Any] = {
        "type": "object",
        "description": describe(resource),
        "properties": {
            "apiVersion": {"type": "string", "description": "Versioned schema of this object."},
            "kind": {"type": "string", "description": "REST resource this object represents."},
            "metadata": {"type": "object"},
            "spec": model_schema(resource.SPEC),
            "status": model_schema(resource.STATUS),
        },
        "required": ["spec"],
    }
    rules = model_rules(resource)
    if rules:
        root["x-kubernetes-validations"] = [rule.to_schema() for rule in rules]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name(resource)},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": resource.KIND,
                "listKind": f"{resource.KIND}List",
                "plural": resource.PLURAL,
                "singular": resource.SINGULAR,
                "shortNames": list(resource.SHORT_NAMES),
                "categories": CATEGORIES,
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def crds() -> list[dict[str, Any]]:
    """Both CRDs."""
    return [
        custom_resource_definition(StreamApp, STREAMAPP_COLUMNS, scale=True),
        custom_resource_definition(StreamAppMember, MEMBER_COLUMNS, scale=False),
    ]


def crd_manifests() -> Files:
    """One file per CRD, named like controller-gen names them."""
    return {f"{GROUP}_{doc['spec']['names']['plural']}.yaml": render([doc], "crd") for doc in crds()}


def crd_files() -> Files:
    """crds/: the CRD files and a kustomization listing them, in a file named `Kustomization`:
    kustomize reads that name, and `kubectl apply -f crds/` skips it (no .yaml extension), so the
    directory applies either way and holds nothing but CRDs for `-f`."""
    files = crd_manifests()
    files[CRD_KUSTOMIZATION] = render(
        [
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": sorted(files),
            }
        ],
        "crd",
    )
    return files
