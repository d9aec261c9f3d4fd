"""The alerting rules shipped for StreamApps and the operator, over the metrics both export.

One list (`alerts`) feeds the chart's PrometheusRule (`metrics.prometheusRule.enabled`, thresholds from
values) and `manifests/monitoring/prometheusrule.yaml`; `tests/api/test_alerts.py` checks every metric
they name is exported, runs `promtool check rules` on them and unit-tests each alert with `promtool test
rules`. What each alert means for the app is in its description, which Alertmanager shows.

The executors' series carry `namespace` and `app` (the chart's PodMonitor copies the pod's app label), so
an executor's alert joins the operator's series of the same app.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INPUT_LAG = "streamapp_input_lag_records"
TASKS = "streamapp_tasks"
FENCED_TASKS = "streamapp_fenced_tasks"
LEADER = "streamapp_leader"
LAST_COMMIT = "streamapp_executor_last_commit_timestamp_seconds"
FULL_RESTORES = "streamapp_executor_full_restores_total"
GROUP_NAME = "streamapp"
LAG_RECORDS = 100_000
"""Default input lag (records) above which a growing lag alerts: size it to a few minutes of input."""
NO_COMMIT_SECONDS = 600
"""Default seconds without a commit, while the app has input waiting, before an active task alerts."""


@dataclass(frozen=True)
class Alert:
    """One alerting rule; `summary` and `description` may use `{{ $labels.<name> }}` and `{{ $value }}`."""

    name: str
    expr: str
    duration: str
    severity: str
    summary: str
    description: str

    def rule(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.duration,
            "labels": {"severity": self.severity},
            "annotations": {"summary": self.summary, "description": self.description},
        }


def alerts(
    lag_records: int | str = LAG_RECORDS, no_commit_seconds: int | str = NO_COMMIT_SECONDS
) -> list[Alert]:
    """The rules; the thresholds may be numbers or template expressions (the chart's values)."""
    app = "{{ $labels.namespace }}/{{ $labels.app }}"
    return [
        Alert(
            "StreamAppInputLagGrowing",
            f"{INPUT_LAG} > {lag_records} and delta({INPUT_LAG}[15m]) > 0",
            "15m",
            "warning",
            f"{app} is falling behind its input",
            "{{ $value }} records of input wait and the backlog has grown for 15 minutes: the app needs "
            "more members (up to spec.partitions), or a task is stuck (see StreamAppTaskNotCommitting).",
        ),
        Alert(
            "StreamAppTasksHeld",
            f'sum by (namespace, app) ({TASKS}{{state="reserved"}}) > 0',
            "10m",
            "warning",
            f"{app} has tasks nobody processes",
            "{{ $value }} tasks are held for lost members and not processed: their members have been gone "
            "10 minutes. The app's status.lostMembers says what the operator expects of each; "
            "rebalance.scheduledRebalanceMaxDelay bounds the wait.",
        ),
        Alert(
            "StreamAppTasksUnassigned",
            f'sum by (namespace, app) ({TASKS}{{state="unassigned"}}) > 0',
            "10m",
            "warning",
            f"{app} has tasks with no member",
            "{{ $value }} tasks have had no member for 10 minutes (spec.replicas 0, or no member ready).",
        ),
        Alert(
            "StreamAppFencedTasks",
            f"{FENCED_TASKS} > 0",
            "5m",
            "warning",
            f"{app} has fenced owners",
            "{{ $value }} tasks' active owners have been fenced by a higher epoch in the state store for 5 "
            "minutes; the operator resolves this by handing out a higher epoch, so a lasting one means it "
            "cannot (see its log and the app's Events).",
        ),
        Alert(
            "StreamAppOperatorNoLeader",
            f"max({LEADER}) < 1 or absent({LEADER})",
            "5m",
            "critical",
            "No StreamApp operator replica leads",
            "No operator replica has held the leader lease for 5 minutes (or none is scraped): apps keep "
            "running, but nothing reacts to scaling, lost members or spec changes.",
        ),
        Alert(
            "StreamAppTaskNotCommitting",
            f"time() - {LAST_COMMIT} > {no_commit_seconds} and on (namespace, app) ({INPUT_LAG} > 0)",
            "5m",
            "warning",
            f"{app} task {{{{ $labels.task }}}} does not commit",
            "Task {{ $labels.task }} on pod {{ $labels.pod }} last committed {{ $value }} s ago "
            "while the app has input waiting: its executor is stuck or failing (see its log and its "
            "StreamAppMember's status).",
        ),
        Alert(
            "StreamAppFullRestores",
            f"increase({FULL_RESTORES}[1h]) > 0",
            "0m",
            "info",
            f"{app}: a member restored a task in full despite its local state",
            "Pod {{ $labels.pod }} restored a task in full in the last hour although it had local state, for "
            "reason {{ $labels.reason }}: delta-expired means it was away longer than stateStore.deltaRetention, "
            "checkpoint-unusable that its volume's copy was torn or of another store kind, delta-larger that "
            "replaying what it missed would have read more than a full restore.",
        ),
    ]


def rule_groups(
    lag_records: int | str = LAG_RECORDS, no_commit_seconds: int | str = NO_COMMIT_SECONDS
) -> list[dict[str, Any]]:
    """The rules as Prometheus rule groups (a rules file's `groups`, a PrometheusRule's `spec.groups`)."""
    return [{"name": GROUP_NAME, "rules": [alert.rule() for alert in alerts(lag_records, no_commit_seconds)]}]
