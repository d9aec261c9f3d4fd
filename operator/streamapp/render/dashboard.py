"""The Grafana dashboard shipped for StreamApps: one app at a time (variables `namespace`, `app`), from the
operator's and the executors' metrics.

Shipped as a ConfigMap by the chart (`metrics.grafanaDashboard.enabled`, labelled for Grafana's
dashboard sidecar) and as `manifests/monitoring/streamapp-dashboard.json`; `tests/api/test_alerts.py`
checks that every query parses (`promtool`) and names only exported metrics.
"""

from __future__ import annotations

from typing import Any

UID = "streamapp-app"
TITLE = "StreamApp"
SELECTOR = 'namespace="$namespace", app="$app"'

# (title, unit, [(query, legend)]) per panel, in reading order.
PANELS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("Input lag", "short", [(f"streamapp_input_lag_records{{{SELECTOR}}}", "records waiting")]),
    ("Tasks by state", "short", [(f"streamapp_tasks{{{SELECTOR}}}", "{{state}}")]),
    (
        "Autoscaler: members wanted, needed, and waiting on its last decision",
        "short",
        [
            (f"streamapp_autoscaler_replicas{{{SELECTOR}}}", "{{kind}}"),
            (f"streamapp_autoscaler_waiting{{{SELECTOR}}}", "waiting"),
            (f"increase(streamapp_autoscaler_decisions_total{{{SELECTOR}}}[10m])", "{{action}} (per 10 min)"),
        ],
    ),
    (
        "Records committed per second, by task",
        "short",
        [
            (
                f"sum by (task) (rate(streamapp_executor_committed_records_total{{{SELECTOR}}}[5m]))",
                "task {{task}}",
            )
        ],
    ),
    (
        "Seconds since each task's last commit",
        "s",
        [
            (
                f"time() - max by (task) (streamapp_executor_last_commit_timestamp_seconds{{{SELECTOR}}})",
                "task {{task}}",
            )
        ],
    ),
    (
        "Task moves and rebalances (per 10 min)",
        "short",
        [
            (f"increase(streamapp_task_movements_total{{{SELECTOR}}}[10m])", "task moves"),
            (f"increase(streamapp_rebalances_total{{{SELECTOR}}}[10m])", "rebalances"),
        ],
    ),
    (
        "Tasks of lost members, by choice",
        "short",
        [(f"streamapp_lost_tasks{{{SELECTOR}}}", "{{choice}}")],
    ),
    (
        "Rows restored, by mode",
        "short",
        [(f"sum by (mode) (streamapp_executor_restored_rows{{{SELECTOR}}})", "{{mode}}")],
    ),
    (
        "Full restores despite local state (per hour)",
        "short",
        [
            (
                f"sum by (reason) (increase(streamapp_executor_full_restores_total{{{SELECTOR}}}[1h]))",
                "{{reason}}",
            )
        ],
    ),
    (
        "Round of batches, p95",
        "s",
        [
            (
                "histogram_quantile(0.95, sum by (le, pod) "
                f"(rate(streamapp_executor_step_seconds_bucket{{{SELECTOR}}}[5m])))",
                "{{pod}}",
            )
        ],
    ),
    (
        "Operator: leader and reconcile p95",
        "short",
        [
            ("max(streamapp_leader)", "leader held"),
            (
                "histogram_quantile(0.95, sum by (le) (rate(streamapp_reconcile_seconds_bucket[5m])))",
                "reconcile p95 (s)",
            ),
        ],
    ),
]


def queries() -> list[str]:
    """Every query of the dashboard, as written (with `$namespace` and `$app`)."""
    return [query for _, _, targets in PANELS for query, _ in targets]


def _variable(name: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "refresh": 2,
        "sort": 1,
    }


def dashboard() -> dict[str, Any]:
    """The dashboard model Grafana imports."""
    panels = []
    for index, (title, unit, targets) in enumerate(PANELS):
        panels.append(
            {
                "id": index + 1,
                "type": "timeseries",
                "title": title,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"expr": query, "legendFormat": legend, "refId": chr(ord("A") + number)}
                    for number, (query, legend) in enumerate(targets)
                ],
            }
        )
    datasource = {"name": "datasource", "type": "datasource", "query": "prometheus"}
    return {
        "uid": UID,
        "title": TITLE,
        "tags": ["streamapp"],
        "schemaVersion": 39,
        "time": {"from": "now-3h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                datasource,
                _variable("namespace", "label_values(streamapp_input_lag_records, namespace)"),
                _variable("app", 'label_values(streamapp_input_lag_records{namespace="$namespace"}, app)'),
            ]
        },
        "panels": panels,
    }
