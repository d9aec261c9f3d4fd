"""The monitoring objects shipped with the operator: the alerts (`alerts`) as a PrometheusRule and the
Grafana dashboard (`dashboard`), for kustomize users in `manifests/monitoring/` (`streamapp monitoring
--write manifests/monitoring`; apply them where prometheus-operator and Grafana run) and as chart
templates (`chart`).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from streamapp.render import alerts, dashboard
from streamapp.render.manifests import NAME, NAMESPACE
from streamapp.render.yamlfiles import Files, render

COMMAND = "monitoring"
RULE_FILE = "prometheusrule.yaml"
DASHBOARD_FILE = "streamapp-dashboard.json"
_LAG, _NO_COMMIT = "@LAG_RECORDS@", "@NO_COMMIT_SECONDS@"


def prometheus_rule() -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/name": NAME}},
        "spec": {"groups": alerts.rule_groups()},
    }


def dashboard_json() -> str:
    return json.dumps(dashboard.dashboard(), indent=2) + "\n"


def monitoring_files() -> Files:
    """manifests/monitoring/: the PrometheusRule and the dashboard."""
    return {RULE_FILE: render([prometheus_rule()], COMMAND), DASHBOARD_FILE: dashboard_json()}


def _helm_literal(text: str) -> str:
    """`text` with its `{{ }}` (Prometheus's templating) passed through Helm's own templating as is."""
    opened, closed = "\x00", "\x01"
    text = text.replace("{{", opened).replace("}}", closed)
    return text.replace(opened, '{{ "{{" }}').replace(closed, '{{ "}}" }}')


def rule_template() -> str:
    """templates/prometheusrule.yaml: the rules, thresholds from values."""
    groups = yaml.safe_dump(
        alerts.rule_groups(_LAG, _NO_COMMIT), sort_keys=False, width=110, default_flow_style=False
    )
    body = _helm_literal(groups)
    body = body.replace(_LAG, "{{ .Values.metrics.prometheusRule.inputLagRecords }}")
    body = body.replace(_NO_COMMIT, "{{ .Values.metrics.prometheusRule.noCommitSeconds }}")
    indented = "".join(f"    {line}\n" for line in body.splitlines())
    return f"""\
{{{{- if .Values.metrics.prometheusRule.enabled }}}}
# The alerts of operator/streamapp/render/alerts.py (lag growing, tasks held or unassigned, fenced owners,
# no leader, a task not committing, full restores).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{{{ include "streamapp-operator.fullname" . }}}}
  namespace: {{{{ .Release.Namespace }}}}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
    {{{{- with .Values.metrics.prometheusRule.labels }}}}
    {{{{- toYaml . | nindent 4 }}}}
    {{{{- end }}}}
spec:
  groups:
{indented}{{{{- end }}}}
"""


DASHBOARD_TEMPLATE = f"""\
{{{{- if .Values.metrics.grafanaDashboard.enabled }}}}
# The StreamApp dashboard (operator/streamapp/render/dashboard.py), for Grafana's dashboard sidecar.
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{{{ include "streamapp-operator.fullname" . }}}}-dashboard
  namespace: {{{{ .Release.Namespace }}}}
  labels:
    {{{{- include "streamapp-operator.labels" . | nindent 4 }}}}
    {{{{- with .Values.metrics.grafanaDashboard.labels }}}}
    {{{{- toYaml . | nindent 4 }}}}
    {{{{- end }}}}
data:
  {DASHBOARD_FILE}: |-
    {{{{- .Files.Get "dashboards/{DASHBOARD_FILE}" | nindent 4 }}}}
{{{{- end }}}}
"""
