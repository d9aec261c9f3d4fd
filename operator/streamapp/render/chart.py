"""The derived parts of the Helm chart (charts/streamapp-operator/), rendered from the same models as
crds/ and manifests/.

What follows from the model or from the operator's own rules is written here: the CRDs, the RBAC rules
(`controller.permissions`), the admission policies, the monitoring objects, the CRD upgrade Job, values.yaml,
values.schema.json and the README's values table (every value declared once in `chartvalues.VALUES`).
A test compares the committed chart with this module's output, so the chart cannot drift from the
operator it installs. The rest of the templates (`HAND_WRITTEN`: the Deployment, Services, helpers, NOTES)
are plain files in the chart, edited and linted as Helm templates.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from streamapp.api.member import StreamAppMember
from streamapp.api.names import APP_LABEL, EXECUTOR_PORT_NAME, MANAGED_BY, MEMBER_LABEL
from streamapp.api.streamapp import StreamApp
from streamapp.controller.permissions import Rule, operator_cluster_role_rules, operator_lease_rules
from streamapp.render import admissionpolicy, flowcontrol, manifests, monitoring, referencepolicy, sparkpolicy
from streamapp.render.chartvalues import COMMAND, NAME, VALUES, values_schema, values_yaml
from streamapp.render.crd import crd_manifests, crd_name
from streamapp.render.rbac import user_roles
from streamapp.render.yamlfiles import Files, render

VERSION = "0.1.0"
# Templates written by hand in charts/streamapp-operator/templates/: nothing in them follows from the model.
HAND_WRITTEN = (
    "_helpers.tpl",
    "deployment.yaml",
    "serviceaccount.yaml",
    "service.yaml",
    "servicemonitor.yaml",
    "poddisruptionbudget.yaml",
    "networkpolicy.yaml",
    "NOTES.txt",
)
APP_VERSION = manifests.IMAGE.partition(":")[2]
# A Role cannot grant these (they are not namespaced): with watchNamespaces they stay in a ClusterRole.
CLUSTER_SCOPED = frozenset({"nodes", "namespaces", "customresourcedefinitions"})


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
{{{{- if .Values.rbac.create }}}}
# What the operator may do: the rules of streamapp.controller.permissions.
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
{{{{- end }}}}
"""


def _pod_monitor_template() -> str:
    """The executors' PodMonitor: every member pod the operator runs, by the labels and port it gives
    them (`api.names`), in the watched namespaces or all."""
    ((managed_key, managed_value),) = MANAGED_BY.items()
    app_source = "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in APP_LABEL)
    return f"""\
{{{{- if .Values.metrics.podMonitor.enabled }}}}
# The executors' /metrics: per-task lag, committed records, last commit, restores.
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{{{ include "streamapp-operator.fullname" . }}}}-executors
  namespace: {{{{ .Release.Namespace }}}}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
    {{{{- with .Values.metrics.serviceMonitor.labels }}}}
    {{{{- toYaml . | nindent 4 }}}}
    {{{{- end }}}}
spec:
  namespaceSelector:
    {{{{- if .Values.watchNamespaces }}}}
    matchNames:
      {{{{- toYaml .Values.watchNamespaces | nindent 6 }}}}
    {{{{- else }}}}
    any: true
    {{{{- end }}}}
  selector:
    matchLabels:
      {managed_key}: {managed_value}
    matchExpressions:
      - {{key: {MEMBER_LABEL}, operator: Exists}}
  podMetricsEndpoints:
    - port: {EXECUTOR_PORT_NAME}
      interval: {{{{ .Values.metrics.serviceMonitor.interval }}}}
      honorLabels: true
      # The app's name as the operator's series carry it, so alerts join executors to their app.
      relabelings:
        - sourceLabels: [{app_source}]
          targetLabel: app
{{{{- end }}}}
"""


def _flow_schema_template() -> str:
    """The operator's FlowSchema (`streamapp.render.flowcontrol`): cluster-scoped, so named per release."""
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
    """The pod-template ValidatingAdmissionPolicy (`streamapp.render.admissionpolicy`) and its binding:
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


def _policy_documents(name: str, documents: tuple[dict[str, Any], ...]) -> str:
    """Cluster-scoped policy objects named per release, with the chart's labels."""
    labels = '    {{- include "streamapp-operator.labels" . | nindent 4 }}'
    rendered = []
    for doc in documents:
        rest = {k: v for k, v in doc.items() if k != "metadata"}
        rendered.append(
            f"apiVersion: {rest.pop('apiVersion')}\nkind: {rest.pop('kind')}\nmetadata:\n  name: {name}\n"
            f"  labels:\n{labels}\n{_block(rest, 0)}"
        )
    return "\n---\n".join(rendered)


def _spark_policies_template() -> str:
    """Spark on Kubernetes (`streamapp.render.sparkpolicy`), where the API server serves admission
    policies: without `sparkExecutors.allowed`, the gate that refuses such apps at apply time; with it,
    the policy that holds the pods members create (left out when pod templates may ask for privileges:
    the executors take their member's securityContext)."""
    served = f'(.Capabilities.APIVersions.Has "{sparkpolicy.API_VERSION}/ValidatingAdmissionPolicy")'
    gate = '{{ include "streamapp-operator.globalName" . }}-spark-executors'
    pods = '{{ include "streamapp-operator.globalName" . }}-member-pods'
    return (
        f"{{{{- if and (not .Values.sparkExecutors.allowed) {served} }}}}\n"
        + _policy_documents(gate, (sparkpolicy.gate_policy(gate), admissionpolicy.binding(gate)))
        + "\n{{- end }}\n"
        + f"{{{{- if and .Values.sparkExecutors.allowed (not .Values.podTemplates.allowPrivileged) {served} }}}}\n"
        + "---\n"
        + _policy_documents(pods, (sparkpolicy.member_pod_policy(pods), sparkpolicy.member_pod_binding(pods)))
        + "\n{{- end }}\n"
    )


REFERENCES_LEFT_OUT = (
    "WARNING: the references admission policy is LEFT OUT: the API server (or `helm template` without "
    "`--api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy`) serves no "
    "ValidatingAdmissionPolicy, so nothing stops a StreamApp from naming Secrets, ConfigMaps or claims "
    "its author may not read. Render against a 1.30+ API server, or pass that --api-versions."
)


def _reference_policy_template() -> str:
    """The references ValidatingAdmissionPolicy (`streamapp.render.referencepolicy`) and its binding:
    cluster-scoped, named per release, only where the API server serves it (1.30+); installed whether
    or not templates may ask for privileges (reading what one may not read is never allowed)."""
    name = '{{ include "streamapp-operator.globalName" . }}-references'
    guard = (
        f"{{{{- if and .Values.references.admissionPolicy "
        f'(.Capabilities.APIVersions.Has "{admissionpolicy.API_VERSION}/ValidatingAdmissionPolicy") }}}}'
    )
    documents = (referencepolicy.policy(name), admissionpolicy.binding(name))
    left_out = f"{{{{- else if .Values.references.admissionPolicy }}}}\n# {REFERENCES_LEFT_OUT}\n"
    return guard + "\n" + _policy_documents(name, documents) + "\n" + left_out + "{{- end }}\n"


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
  ttlSecondsAfterFinished: {{{{ .Values.crds.upgradeJob.ttlSecondsAfterFinished }}}}
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
          resources:
            {{{{- toYaml .Values.crds.upgradeJob.resources | nindent 12 }}}}
          securityContext:
            {{{{- toYaml .Values.securityContext | nindent 12 }}}}
{{{{- end }}}}
"""


def _aggregate_roles_template() -> str:
    """Users' rights on StreamApps through the built-in roles (`rbac.user_roles`)."""
    roles = []
    for role, rules in user_roles().items():
        roles.append(f"""\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{{{ include "streamapp-operator.globalName" . }}}}-{role}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
    rbac.authorization.k8s.io/aggregate-to-{role}: "true"
rules:
{_block(rules, 2)}""")
    body = "\n---\n".join(roles)
    return f"{{{{- if .Values.rbac.aggregateToDefaultRoles }}}}\n{body}\n{{{{- end }}}}\n"


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
<!-- Generated by `streamapp chart --write DIR` from operator/streamapp/render; do not edit. -->
# {NAME} Helm chart

Installs the StreamApp operator: its CRDs (`crds/`), ServiceAccount, RBAC, the operator Deployment
(`{manifests.OPERATOR_REPLICAS}` replicas, one leader through a Lease) and its metrics Service. What follows
from the resource model is generated by `make crds` (`streamapp chart --write charts/{NAME}`): the CRDs
(those of `crds/`), the RBAC rules, the admission policies, the monitoring objects, values.yaml, its
schema and this README; a test fails when the committed chart differs. The other templates
({", ".join(f"`{name}`" for name in HAND_WRITTEN)}) are written by hand.

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
    files.update({f"crds/{name}": text for name, text in crd_manifests().items()})
    files[f"dashboards/{monitoring.DASHBOARD_FILE}"] = monitoring.dashboard_json()
    header = (
        "{{/* Generated by `streamapp chart --write DIR` from operator/streamapp/render; do not edit. */}}\n"
    )
    templates = {
        "rbac.yaml": header + _rbac_template(),
        "podmonitor.yaml": header + _pod_monitor_template(),
        "prometheusrule.yaml": header + monitoring.rule_template(),
        "grafana-dashboard.yaml": header + monitoring.DASHBOARD_TEMPLATE,
        "flowschema.yaml": header + _flow_schema_template(),
        "admissionpolicy.yaml": header + _admission_policy_template(),
        "sparkpolicy.yaml": header + _spark_policies_template(),
        "referencepolicy.yaml": header + _reference_policy_template(),
        "crd-upgrade-job.yaml": header + _crd_job_template(),
        "aggregate-roles.yaml": header + _aggregate_roles_template(),
    }
    files.update({f"templates/{name}": text for name, text in templates.items()})
    return files
