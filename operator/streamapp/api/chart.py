"""The Helm chart (charts/streamapp-operator/), generated from the same models as crds/ and manifests/.

Templates are Go-template text with YAML blocks generated here: the RBAC rules come from
`streamapp.api.rbac` and the CRDs from `streamapp.api.crd`, so the chart cannot drift from the operator it
installs (a test compares the committed chart with this module's output). Every value is declared once in
`VALUES`, which yields values.yaml, values.schema.json and the README's table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from streamapp.api import admissionpolicy, flowcontrol, manifests
from streamapp.api.crd import crd_files, crd_name
from streamapp.api.member import StreamAppMember
from streamapp.api.rbac import Rule, operator_cluster_role_rules, operator_lease_rules
from streamapp.api.streamapp import StreamApp
from streamapp.api.yamlfiles import HEADER, KUSTOMIZATION, Files, render

NAME = manifests.NAME
VERSION = "0.1.0"
COMMAND = "chart"
IMAGE_REPOSITORY, _, APP_VERSION = manifests.IMAGE.partition(":")
# A Role cannot grant these (they are not namespaced): with watchNamespaces they stay in a ClusterRole.
CLUSTER_SCOPED = frozenset({"nodes", "namespaces", "customresourcedefinitions"})

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
    Value("metrics.serviceMonitor.labels", {}, _STRINGS, "Labels a Prometheus selects ServiceMonitors by."),
    Value(
        "flowControl.enabled",
        True,
        {"type": "boolean"},
        "A FlowSchema that queues the operator's API requests at a priority level of their own rather than "
        "with every executor's ServiceAccount.",
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


class _Dumper(yaml.SafeDumper):
    """No anchors: rules share their verb lists, and a template reader expects each written out."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _block(data: Any, indent: int) -> str:
    """YAML of `data` indented for embedding in a template, leaf lists in flow style."""
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=110)
    return "".join(f"{' ' * indent}{line}" for line in text.splitlines(keepends=True)).rstrip("\n")


def namespaced_rules() -> list[Rule]:
    """The operator's rules a Role can grant in a watched namespace."""
    return [rule for rule in operator_cluster_role_rules() if not CLUSTER_SCOPED & set(rule["resources"])]


def cluster_scoped_rules() -> list[Rule]:
    """Reads a Role cannot grant: node zones, and the namespace and CRD watches kopf keeps (without them
    it logs a warning and misses namespaces and CRDs that change after it started)."""
    return [rule for rule in operator_cluster_role_rules() if CLUSTER_SCOPED & set(rule["resources"])]


def crd_upgrade_rules() -> list[Rule]:
    """The CRD Job's rights: read and apply the two CRDs. RBAC cannot limit `create` by name, so creating
    is granted on its own (server-side apply creates a missing CRD)."""
    names = [crd_name(StreamApp), crd_name(StreamAppMember)]
    group, plural = "apiextensions.k8s.io", "customresourcedefinitions"
    return [
        {"apiGroups": [group], "resources": [plural], "resourceNames": names, "verbs": ["get", "patch"]},
        {"apiGroups": [group], "resources": [plural], "verbs": ["create"]},
    ]


def chart_yaml() -> dict[str, Any]:
    """Chart.yaml."""
    return {
        "apiVersion": "v2",
        "name": NAME,
        "description": "StreamApp Operator: stateful PySpark stream processing with cooperative rebalancing",
        "type": "application",
        "version": VERSION,
        "appVersion": APP_VERSION,
        "kubeVersion": ">=1.29.0-0",
        "keywords": ["streaming", "pyspark", "operator", "rebalancing"],
    }


HELPERS = """\
{{/* Generated by `streamapp chart --write DIR` from operator/streamapp/api; do not edit. */}}

{{- define "streamapp-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "streamapp-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Objects outside the release namespace (cluster-scoped, or in watched namespaces) carry the release
namespace in their name, so two releases of the same name in different namespaces do not collide. */}}
{{- define "streamapp-operator.globalName" -}}
{{- printf "%s-%s" .Release.Namespace (include "streamapp-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "streamapp-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamapp-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "streamapp-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "streamapp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: streamapp
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "streamapp-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "streamapp-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "streamapp-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Scheduling and pull settings shared by the operator pods and the CRD Job. */}}
{{- define "streamapp-operator.podPlacement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}
"""

DEPLOYMENT = """\
{{- if and (not .Values.leaderElection.enabled) (gt (int .Values.replicaCount) 1) }}
{{- fail "leaderElection.enabled=false: replicas would all act at once, set replicaCount to 1" }}
{{- end }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "streamapp-operator.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "streamapp-operator.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels:
      {{- include "streamapp-operator.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "streamapp-operator.labels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "streamapp-operator.serviceAccountName" . }}
      {{- include "streamapp-operator.podPlacement" . | nindent 6 }}
      affinity:
        {{- if .Values.affinity }}
        {{- toYaml .Values.affinity | nindent 8 }}
        {{- else }}
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "streamapp-operator.selectorLabels" . | nindent 20 }}
        {{- end }}
      containers:
        - name: operator
          image: {{ include "streamapp-operator.image" . }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          command: [streamapp, operator]
          args:
            {{- range .Values.watchNamespaces }}
            - --namespace
            - {{ . | quote }}
            {{- else }}
            - --all-namespaces
            {{- end }}
            - --metrics-port
            - {{ .Values.metrics.port | quote }}
            # The pod IP, not 0.0.0.0: pods that share a host's network (the local process node) can
            # then all serve on the same port.
            - --metrics-address
            - $(POD_IP)
            {{- if .Values.podTemplates.allowPrivileged }}
            - --allow-privileged-pod-templates
            {{- end }}
            {{- if .Values.leaderElection.enabled }}
            # The Lease lives in $POD_NAMESPACE; the holder's identity is $POD_NAME.
            - --lease-name
            - {{ include "streamapp-operator.fullname" . }}
            {{- else }}
            - --no-leader-election
            {{- end }}
          env:
            - name: POD_NAME
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
            - name: POD_IP
              valueFrom: {fieldRef: {fieldPath: status.podIP}}
            {{- with .Values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: {{ .Values.metrics.port }}
              protocol: TCP
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          securityContext:
            {{- toYaml .Values.securityContext | nindent 12 }}
          # The root filesystem is read-only: temporary files go to an emptyDir.
          volumeMounts:
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: tmp
          emptyDir: {}
"""

SERVICE_ACCOUNT = """\
{{- if .Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "streamapp-operator.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "streamapp-operator.labels" . | nindent 4 }}
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
"""


def _rbac_template() -> str:
    """ClusterRole (all namespaces) or a Role per watched namespace plus a ClusterRole of the
    cluster-scoped reads; always the Lease Role in the release namespace."""
    subject = """\
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ $.Release.Namespace }}"""
    return f"""\
{{{{- $sa := include "streamapp-operator.serviceAccountName" . }}}}
{{{{- $global := include "streamapp-operator.globalName" . }}}}
{{{{- $name := include "streamapp-operator.fullname" . }}}}
# What the operator may do: rules generated from streamapp.api.rbac.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{{{ $global }}}}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
rules:
{{{{- if .Values.watchNamespaces }}}}
  # Watching listed namespaces: only what a Role cannot grant.
{_block(cluster_scoped_rules(), 2)}
{{{{- else }}}}
  # Watching every namespace (--all-namespaces).
{_block(operator_cluster_role_rules(), 2)}
{{{{- end }}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{{{ $global }}}}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{{{ $global }}}}
{subject}
{{{{- range .Values.watchNamespaces }}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{{{ $global }}}}
  namespace: {{{{ . }}}}
  labels:
    {{{{- include "streamapp-operator.labels" $ | nindent 4 }}}}
rules:
{_block(namespaced_rules(), 2)}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{{{ $global }}}}
  namespace: {{{{ . }}}}
  labels:
    {{{{- include "streamapp-operator.labels" $ | nindent 4 }}}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{{{ $global }}}}
{subject}
{{{{- end }}}}
{{{{- if .Values.leaderElection.enabled }}}}
---
# Leader election: the Lease in the release namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{{{ $name }}}}-leader-election
  namespace: {{{{ .Release.Namespace }}}}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
rules:
{_block(operator_lease_rules(), 2)}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{{{ $name }}}}-leader-election
  namespace: {{{{ .Release.Namespace }}}}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{{{ $name }}}}-leader-election
{subject}
{{{{- end }}}}
"""


SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: {{ include "streamapp-operator.fullname" . }}-metrics
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "streamapp-operator.labels" . | nindent 4 }}
    app.kubernetes.io/component: metrics
spec:
  selector:
    {{- include "streamapp-operator.selectorLabels" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ .Values.metrics.port }}
      targetPort: metrics
"""

SERVICE_MONITOR = """\
{{- if .Values.metrics.serviceMonitor.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "streamapp-operator.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "streamapp-operator.labels" . | nindent 4 }}
    {{- with .Values.metrics.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "streamapp-operator.selectorLabels" . | nindent 6 }}
      app.kubernetes.io/component: metrics
  endpoints:
    - port: metrics
      interval: {{ .Values.metrics.serviceMonitor.interval }}
{{- end }}
"""


def _flow_schema_template() -> str:
    """The operator's FlowSchema (`streamapp.api.flowcontrol`): cluster-scoped, so named per release."""
    return f"""\
{{{{- if .Values.flowControl.enabled }}}}
apiVersion: {flowcontrol.API_VERSION}
kind: FlowSchema
metadata:
  name: {{{{ include "streamapp-operator.globalName" . }}}}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
spec:
  priorityLevelConfiguration:
    name: {{{{ .Values.flowControl.priorityLevel }}}}
  matchingPrecedence: {{{{ .Values.flowControl.matchingPrecedence }}}}
  distinguisherMethod:
    type: ByUser
  rules:
    - subjects:
        - kind: ServiceAccount
          serviceAccount:
            name: {{{{ include "streamapp-operator.serviceAccountName" . }}}}
            namespace: {{{{ .Release.Namespace }}}}
      resourceRules:
{_block(flowcontrol.RESOURCE_RULES, 8)}
{{{{- end }}}}
"""


def _admission_policy_template() -> str:
    """The pod-template ValidatingAdmissionPolicy (`streamapp.api.admissionpolicy`) and its binding:
    cluster-scoped, named per release; only where the API server serves it (1.30+), and not when the
    install lets templates ask for privileges."""
    name = '{{ include "streamapp-operator.globalName" . }}-pod-templates'
    policy, binding = admissionpolicy.policy(name), admissionpolicy.binding(name)
    labels = '    {{- include "streamapp-operator.labels" . | nindent 4 }}'
    guard = (
        f"{{{{- if and .Values.podTemplates.admissionPolicy (not .Values.podTemplates.allowPrivileged) "
        f'(.Capabilities.APIVersions.Has "{admissionpolicy.API_VERSION}/ValidatingAdmissionPolicy") }}}}'
    )
    documents = []
    for doc in (policy, binding):
        rest = {k: v for k, v in doc.items() if k != "metadata"}
        documents.append(
            f"apiVersion: {rest.pop('apiVersion')}\nkind: {rest.pop('kind')}\nmetadata:\n  name: {name}\n"
            f"  labels:\n{labels}\n{_block(rest, 0)}"
        )
    return guard + "\n" + "\n---\n".join(documents) + "\n{{- end }}\n"


def _crd_job_template() -> str:
    """The opt-in CRD upgrade: hooks run before the release's objects, so the Job brings its own
    ServiceAccount and ClusterRole (lower hook weights come first); all are deleted once it succeeded."""

    def hook(weight: int) -> str:
        return f"""\
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "{weight}"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded"""

    labels = """\
  labels:
    {{- include "streamapp-operator.labels" . | nindent 4 }}"""
    return f"""\
{{{{- if .Values.crds.upgradeJob.enabled }}}}
{{{{- $name := printf "%s-crds" (include "streamapp-operator.fullname" .) }}}}
{{{{- $global := printf "%s-crds" (include "streamapp-operator.globalName" .) }}}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{{{ $name }}}}
  namespace: {{{{ .Release.Namespace }}}}
{labels}
{hook(-10)}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{{{ $global }}}}
{labels}
{hook(-10)}
rules:
{_block(crd_upgrade_rules(), 2)}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{{{ $global }}}}
{labels}
{hook(-5)}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{{{ $global }}}}
subjects:
  - kind: ServiceAccount
    name: {{{{ $name }}}}
    namespace: {{{{ .Release.Namespace }}}}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{{{ $name }}}}
  namespace: {{{{ .Release.Namespace }}}}
{labels}
{hook(0)}
spec:
  backoffLimit: 3
  template:
    metadata:
      labels:
        {{{{- include "streamapp-operator.selectorLabels" . | nindent 8 }}}}
        app.kubernetes.io/component: crd-upgrade
    spec:
      serviceAccountName: {{{{ $name }}}}
      restartPolicy: Never
      {{{{- include "streamapp-operator.podPlacement" . | nindent 6 }}}}
      containers:
        - name: apply-crds
          image: {{{{ include "streamapp-operator.image" . }}}}
          imagePullPolicy: {{{{ .Values.image.pullPolicy }}}}
          # Server-side apply of the CRDs this image's streamapp package generates.
          command: [streamapp, crd, --apply]
          securityContext:
            {{{{- toYaml .Values.securityContext | nindent 12 }}}}
{{{{- end }}}}
"""


NOTES = """\
{{ include "streamapp-operator.fullname" . }} is installed in namespace {{ .Release.Namespace }}.

Watching: {{ if .Values.watchNamespaces }}{{ join ", " .Values.watchNamespaces }}{{ else }}all namespaces{{ end }}
Replicas: {{ .Values.replicaCount }}{{ if .Values.leaderElection.enabled }} (one leader, Lease {{ .Release.Namespace }}/{{ include "streamapp-operator.fullname" . }}){{ else }} (no leader election){{ end }}

  kubectl -n {{ .Release.Namespace }} get pods -l app.kubernetes.io/instance={{ .Release.Name }}
  kubectl get streamapps --all-namespaces

Metrics: service {{ include "streamapp-operator.fullname" . }}-metrics, port {{ .Values.metrics.port }}.

Helm installs crds/ only when the CRDs are missing and never upgrades them. After upgrading the chart,
apply them yourself:

  kubectl apply --server-side -f <chart>/crds/
{{ if not .Values.crds.upgradeJob.enabled }}
Or set crds.upgradeJob.enabled=true to have a hook Job apply them before each install and upgrade.
{{- end }}
"""


def _values_table() -> str:
    rows = ["| value | default | description |", "|---|---|---|"]
    for value in VALUES:
        default = json.dumps(value.default)
        enum = value.schema.get("enum")
        allowed = f" One of {', '.join(f'`{e}`' for e in enum)}." if enum else ""
        rows.append(f"| `{value.path}` | `{default}` | {value.description}{allowed} |")
    return "\n".join(rows)


def readme() -> str:
    """The chart's README: install, values, upgrades (CRDs included), uninstall."""
    return f"""\
<!-- Generated by `streamapp chart --write DIR` from operator/streamapp/api; do not edit. -->
# {NAME} Helm chart

Installs the StreamApp operator: its CRDs (`crds/`), ServiceAccount, RBAC, the operator Deployment
(`{manifests.OPERATOR_REPLICAS}` replicas, one leader through a Lease) and its metrics Service. Everything
here is generated from `operator/streamapp/api` by `make crds` (`streamapp chart --write
charts/{NAME}`); a test fails when the committed chart differs. The RBAC rules are those of
`streamapp.api.rbac`, the CRDs those of `crds/`.

## Install

```sh
helm install streamapp charts/{NAME} --namespace streamapp-system --create-namespace
# only some namespaces (they must exist): a Role per namespace instead of a ClusterRole
helm install streamapp charts/{NAME} -n streamapp-system --create-namespace \\
  --set 'watchNamespaces={{team-a,team-b}}'
# a single replica without leader election
helm install streamapp charts/{NAME} -n streamapp-system --set replicaCount=1 --set leaderElection.enabled=false
```

`values.schema.json` rejects unknown keys and wrongly typed values (`--set replicaCount=abc` fails).

What the operator process is told: `streamapp operator --all-namespaces` (or `--namespace NS` per
watched namespace), `--metrics-port`, `--metrics-address $(POD_IP)`, and `--lease-name <fullname>` with
the Lease in the release namespace (`$POD_NAMESPACE`, identity `$POD_NAME`) or `--no-leader-election`.
It logs in with its ServiceAccount (in-cluster configuration).

RBAC: with `watchNamespaces` empty one ClusterRole holds every rule. With namespaces listed, each gets a
Role with the namespaced rules, and a small ClusterRole keeps what a Role cannot grant: reading nodes
(zones, for standby placement), namespaces and CRDs (kopf watches both; without them it only logs a
warning and misses changes after start). The Lease Role lives in the release namespace. Objects outside
the release namespace are named `<release namespace>-<fullname>`.

Flow control: a FlowSchema (`flowControl.*`, on by default) sends the operator's API requests to the
`workload-high` priority level. Without it they share one level with every member's executor, each
executor being a ServiceAccount of its own, and get one fair share among all those with requests queued.

## Values

{_values_table()}

## Upgrade

```sh
kubectl apply --server-side -f charts/{NAME}/crds/   # first: Helm never upgrades crds/
helm upgrade streamapp charts/{NAME} -n streamapp-system --reuse-values
```

Helm installs `crds/` only when a CRD is missing and never changes it afterwards, so a new chart version's
schema must be applied on its own, as above. Or set `crds.upgradeJob.enabled=true`: a pre-install and
pre-upgrade hook Job runs `streamapp crd --apply` with the operator image — a server-side apply (field
manager `streamapp`) of the CRDs that image generates — under its own ServiceAccount and a ClusterRole
limited to get/patch on `{crd_name(StreamApp)}` and `{crd_name(StreamAppMember)}` (and `create`, which RBAC
cannot limit by name). The hook's objects are deleted once it succeeded.

## Uninstall

```sh
helm uninstall streamapp -n streamapp-system
```

This removes the operator and its RBAC. The CRDs and every StreamApp stay (Helm never deletes `crds/`);
delete the CRDs yourself to remove all apps. Apps keep running without the operator, unmanaged.
"""


def chart_files() -> Files:
    """charts/streamapp-operator/: metadata, values and their schema, CRDs, templates, README."""
    files: Files = {
        "Chart.yaml": render([chart_yaml()], COMMAND),
        "values.yaml": values_yaml(),
        "values.schema.json": json.dumps(values_schema(), indent=2) + "\n",
        "README.md": readme(),
    }
    files.update({f"crds/{name}": text for name, text in crd_files().items() if name != KUSTOMIZATION})
    header = (
        "{{/* Generated by `streamapp chart --write DIR` from operator/streamapp/api; do not edit. */}}\n"
    )
    templates = {
        "_helpers.tpl": HELPERS,
        "deployment.yaml": header + DEPLOYMENT,
        "serviceaccount.yaml": header + SERVICE_ACCOUNT,
        "rbac.yaml": header + _rbac_template(),
        "service.yaml": header + SERVICE,
        "servicemonitor.yaml": header + SERVICE_MONITOR,
        "flowschema.yaml": header + _flow_schema_template(),
        "admissionpolicy.yaml": header + _admission_policy_template(),
        "crd-upgrade-job.yaml": header + _crd_job_template(),
        "NOTES.txt": NOTES,
    }
    files.update({f"templates/{name}": text for name, text in templates.items()})
    return files
