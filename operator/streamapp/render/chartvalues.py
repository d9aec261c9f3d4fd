"""The Helm chart's values: each declared once (path, default, JSON schema, what it is for), which yields
values.yaml, values.schema.json and the chart README's table (`chart`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from streamapp.controller.operatorcli import LOG_LEVELS
from streamapp.render import alerts, flowcontrol, manifests
from streamapp.render.yamlfiles import HEADER

NAME = manifests.NAME
COMMAND = "chart"
IMAGE_REPOSITORY = manifests.IMAGE.partition(":")[0]

_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
_OBJECT = {"type": "object"}
_LIST_OF_OBJECTS = {"type": "array", "items": {"type": "object"}}


@dataclass(frozen=True)
class Value:
    """One leaf of values.yaml: its dotted path, default, JSON schema and what it is for."""

    path: str
    default: Any
    schema: dict[str, Any]
    description: str


def _operator_pod() -> dict[str, Any]:
    """The pod spec of manifests/ — the chart's defaults are the kustomize install's settings."""
    pod: dict[str, Any] = manifests.deployment()["spec"]["template"]["spec"]
    return pod


VALUES: tuple[Value, ...] = (
    Value("image.repository", IMAGE_REPOSITORY, {"type": "string", "minLength": 1}, "Operator image."),
    Value("image.tag", "", {"type": "string"}, "Image tag; empty means the chart's appVersion."),
    Value(
        "image.pullPolicy",
        "IfNotPresent",
        {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]},
        "Image pull policy.",
    ),
    Value("imagePullSecrets", [], _LIST_OF_OBJECTS, "Secrets for a private registry (`[{name: ...}]`)."),
    Value("nameOverride", "", {"type": "string"}, "Replaces the chart name in object names."),
    Value("fullnameOverride", "", {"type": "string"}, "Replaces `<release>-<chart>` in object names."),
    Value(
        "replicaCount",
        manifests.OPERATOR_REPLICAS,
        {"type": "integer", "minimum": 1},
        "Operator replicas; one leader acts, the others wait on the Lease. Must be 1 without leader election.",
    ),
    Value(
        "leaderElection.enabled",
        True,
        {"type": "boolean"},
        "Act only while holding a Lease in the release namespace; false passes `--no-leader-election`.",
    ),
    Value(
        "podTemplates.allowPrivileged",
        False,
        {"type": "boolean"},
        "Let StreamApps' pod templates ask for more than the restricted Pod Security profile "
        "(`--allow-privileged-pod-templates`); it also leaves the admission policy out.",
    ),
    Value(
        "podTemplates.admissionPolicy",
        True,
        {"type": "boolean"},
        "A ValidatingAdmissionPolicy that refuses, at apply time, a StreamApp whose pod template asks "
        "for what the operator would refuse (Kubernetes 1.30 or later; left out on older clusters).",
    ),
    Value(
        "sparkExecutors.allowed",
        False,
        {"type": "boolean"},
        "Run StreamApps with `spec.executor.sparkExecutors` (`--allow-spark-executors`): their members' "
        "ServiceAccounts may create pods in their namespace. Off: such apps are refused, at apply time "
        "too (an admission policy); on: an admission policy holds the pods members create to the "
        "restricted profile, their own account and the app's image.",
    ),
    Value(
        "references.admissionPolicy",
        True,
        {"type": "boolean"},
        "A ValidatingAdmissionPolicy that refuses, at apply time, a StreamApp naming a Secret, ConfigMap, "
        "claim or image pull secret its author may not get (Kubernetes 1.30 or later; kept with "
        "podTemplates.allowPrivileged).",
    ),
    Value(
        "watchNamespaces",
        [],
        {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True},
        "Namespaces to watch (each must exist): a Role per namespace instead of a ClusterRole. "
        "Empty: `--all-namespaces`.",
    ),
    Value("serviceAccount.create", True, {"type": "boolean"}, "Create the operator's ServiceAccount."),
    Value("serviceAccount.name", "", {"type": "string"}, "Its name; empty means the release's full name."),
    Value("serviceAccount.annotations", {}, _STRINGS, "Annotations, e.g. for workload identity."),
    Value("podAnnotations", {}, _STRINGS, "Extra annotations of the operator pods."),
    Value("podLabels", {}, _STRINGS, "Extra labels of the operator pods."),
    Value(
        "resources", _operator_pod()["containers"][0]["resources"], _OBJECT, "Operator container resources."
    ),
    Value("podSecurityContext", _operator_pod()["securityContext"], _OBJECT, "Pod securityContext."),
    Value(
        "securityContext",
        _operator_pod()["containers"][0]["securityContext"],
        _OBJECT,
        "Operator container securityContext.",
    ),
    Value(
        "revisionHistoryLimit", 3, {"type": "integer", "minimum": 0}, "Old ReplicaSets kept for a rollback."
    ),
    Value(
        "priorityClassName",
        "",
        {"type": "string"},
        "PriorityClass of the operator pods: one above the apps' keeps the operator from being preempted "
        "by the executors it manages.",
    ),
    Value(
        "topologySpreadConstraints",
        [],
        _LIST_OF_OBJECTS,
        "Topology spread of the operator pods (labelSelector defaults to theirs when left out).",
    ),
    Value(
        "podDisruptionBudget.enabled",
        True,
        {"type": "boolean"},
        "A PodDisruptionBudget of maxUnavailable 1 (with replicaCount > 1), so a drain keeps a replica "
        "to take the Lease over.",
    ),
    Value(
        "probes.enabled",
        True,
        {"type": "boolean"},
        "Liveness and readiness probes on the metrics port, which every replica serves whether it leads "
        "or waits (the kubelet restarts one whose process stopped answering).",
    ),
    Value(
        "logging.level",
        "info",
        {"type": "string", "enum": list(LOG_LEVELS)},
        "The least severe messages the operator logs (`--log-level`).",
    ),
    Value(
        "logging.format",
        "text",
        {"type": "string", "enum": ["text", "json"]},
        "`json`: one object a line (message, timestamp, severity) for log pipelines (`--log-format`).",
    ),
    Value(
        "extraArgs",
        [],
        {"type": "array", "items": {"type": "string"}},
        "Extra operator flags, e.g. `--min-reconcile-interval=5` or `--verbose` (`streamapp operator -h`).",
    ),
    Value(
        "rbac.create",
        True,
        {"type": "boolean"},
        "Create the operator's ClusterRole (or Roles) and bindings; false where RBAC is managed elsewhere: grant "
        "what `streamapp manifests` prints in rbac.yaml (the CRD upgrade hook keeps its own).",
    ),
    Value(
        "rbac.aggregateToDefaultRoles",
        True,
        {"type": "boolean"},
        "ClusterRoles aggregated into the built-in `view` (read StreamApps and StreamAppMembers), `edit` "
        "and `admin` (also create, change and delete StreamApps and scale them) roles.",
    ),
    Value(
        "networkPolicy.enabled",
        False,
        {"type": "boolean"},
        "A NetworkPolicy that admits ingress to the operator pods only on the metrics port (egress, to "
        "the API server, stays open).",
    ),
    Value("nodeSelector", {}, _STRINGS, "Node labels the operator pods (and the CRD Job) must match."),
    Value("tolerations", [], _LIST_OF_OBJECTS, "Tolerations of the operator pods (and the CRD Job)."),
    Value(
        "affinity",
        {},
        _OBJECT,
        "Pod affinity; empty means: prefer spreading the replicas over nodes, so a drain keeps a standby.",
    ),
    Value("extraEnv", [], _LIST_OF_OBJECTS, "Extra env entries of the operator container."),
    Value(
        "metrics.port",
        manifests.METRICS_PORT,
        {"type": "integer", "minimum": 1, "maximum": 65535},
        "Prometheus port, served on the pod IP.",
    ),
    Value(
        "metrics.serviceMonitor.enabled",
        False,
        {"type": "boolean"},
        "Create a prometheus-operator ServiceMonitor.",
    ),
    Value(
        "metrics.serviceMonitor.interval",
        "30s",
        {"type": "string", "pattern": "^([0-9]+(ms|s|m|h))+$"},
        "Scrape interval.",
    ),
    Value(
        "metrics.serviceMonitor.labels",
        {},
        _STRINGS,
        "Labels a Prometheus selects ServiceMonitors (and the PodMonitor) by.",
    ),
    Value(
        "metrics.podMonitor.enabled",
        False,
        {"type": "boolean"},
        "Create a prometheus-operator PodMonitor for the executors' /metrics (every member pod).",
    ),
    Value(
        "metrics.prometheusRule.enabled",
        False,
        {"type": "boolean"},
        "Create a prometheus-operator PrometheusRule with the alerts of `streamapp.render.alerts` (lag growing, "
        "tasks held or unassigned, fenced owners, no leader, a task not committing, full restores).",
    ),
    Value(
        "metrics.prometheusRule.labels",
        {},
        _STRINGS,
        "Labels a Prometheus selects PrometheusRules by.",
    ),
    Value(
        "metrics.prometheusRule.inputLagRecords",
        alerts.LAG_RECORDS,
        {"type": "integer", "minimum": 0},
        "Input lag (records) above which a growing lag alerts; size it to a few minutes of input.",
    ),
    Value(
        "metrics.prometheusRule.noCommitSeconds",
        alerts.NO_COMMIT_SECONDS,
        {"type": "integer", "minimum": 1},
        "Seconds without a commit, while its app has input waiting, before an active task alerts.",
    ),
    Value(
        "metrics.grafanaDashboard.enabled",
        False,
        {"type": "boolean"},
        "Create a ConfigMap holding the StreamApp Grafana dashboard (`streamapp.render.dashboard`).",
    ),
    Value(
        "metrics.grafanaDashboard.labels",
        {"grafana_dashboard": "1"},
        _STRINGS,
        "Labels Grafana's dashboard sidecar selects ConfigMaps by.",
    ),
    Value(
        "flowControl.enabled",
        False,
        {"type": "boolean"},
        "A FlowSchema (cluster-wide, hence opt-in) that queues the operator's API requests at a priority "
        "level of their own rather than with every executor's ServiceAccount: for clusters whose API "
        "server is busy with many members' reports.",
    ),
    Value(
        "flowControl.priorityLevel",
        flowcontrol.PRIORITY_LEVEL,
        {"type": "string", "minLength": 1},
        "The PriorityLevelConfiguration the operator's requests go to (it must exist; a missing one leaves "
        "the FlowSchema dangling and the requests at the defaults).",
    ),
    Value(
        "flowControl.matchingPrecedence",
        flowcontrol.MATCHING_PRECEDENCE,
        {"type": "integer", "minimum": 1, "maximum": flowcontrol.SERVICE_ACCOUNTS_PRECEDENCE - 1},
        "The FlowSchema's precedence; below the built-in `service-accounts` schema's "
        f"{flowcontrol.SERVICE_ACCOUNTS_PRECEDENCE}, which would match first otherwise.",
    ),
    Value(
        "crds.upgradeJob.enabled",
        False,
        {"type": "boolean"},
        "Run `streamapp crd --apply` (server-side apply) in a pre-install/pre-upgrade hook Job, because "
        "Helm never upgrades crds/.",
    ),
    Value(
        "crds.upgradeJob.resources",
        {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        _OBJECT,
        "Resources of the CRD Job (one short Python process).",
    ),
    Value(
        "crds.upgradeJob.ttlSecondsAfterFinished",
        86_400,
        {"type": "integer", "minimum": 0},
        "A Job that failed is kept this long for its logs (one that succeeded is deleted at once).",
    ),
)


def _nest(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """{"a.b": x} → {"a": {"b": x}}, keeping declaration order."""
    tree: dict[str, Any] = {}
    for path, leaf in pairs:
        *parents, key = path.split(".")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[key] = leaf
    return tree


def default_values() -> dict[str, Any]:
    """values.yaml as data."""
    return _nest([(value.path, value.default) for value in VALUES])


def values_yaml() -> str:
    """values.yaml with each leaf's description as a comment above it."""
    lines = [HEADER.format(command=COMMAND).rstrip("\n"), "# See README.md for every value."]
    described = {value.path: value for value in VALUES}

    def emit(tree: dict[str, Any], prefix: str, depth: int) -> None:
        indent = "  " * depth
        for key, node in tree.items():
            path = f"{prefix}{key}"
            if path in described:
                lines.append(f"{indent}# {described[path].description}")
                dumped = yaml.safe_dump({key: node}, sort_keys=False, default_flow_style=False, width=110)
                lines.extend(f"{indent}{line}" for line in dumped.splitlines())
            else:
                lines.append(f"{indent}{key}:")
                emit(node, f"{path}.", depth + 1)

    emit(default_values(), "", 0)
    return "\n".join(lines) + "\n"


def values_schema() -> dict[str, Any]:
    """values.schema.json: strict objects (unknown keys fail `helm install`), typed leaves."""

    def objects(tree: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {key: objects(node) if "type" not in node else node for key, node in tree.items()},
        }

    leaves = [(v.path, {**v.schema, "description": v.description}) for v in VALUES]
    schema = objects(_nest(leaves))
    # Helm passes `global` to every chart (and to this one as a subchart); it is not ours to restrict.
    schema["properties"]["global"] = {"type": "object"}
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": f"{NAME} values", **schema}
