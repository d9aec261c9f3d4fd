"""The shipped alerts and dashboard: every metric they name is one the operator or the executors export,
Prometheus's own `promtool` accepts the rules and every dashboard query, and each alert fires when it
should and stays quiet when it should not (`promtool test rules`, on series written here)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from streamapp.controller.metrics import Metrics
from streamapp.executor.runtimeplane import RuntimeDataPlane
from streamapp.render import alerts, dashboard
from streamapp.render.monitoring import prometheus_rule

METRIC = re.compile(r"\bstreamapp_[a-z_]+")
LABELS = 'namespace="shop", app="clicks"'


def exported() -> set[str]:
    """Every series name the operator's and an executor's registries can expose."""
    registry = CollectorRegistry()
    Metrics(registry)
    RuntimeDataPlane(None, registry)  # type: ignore[arg-type]  # the executor is only kept, not used
    names: set[str] = set()
    for family in registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names.add(f"{family.name}_total")
        if family.type == "histogram":
            names.update(f"{family.name}{suffix}" for suffix in ("_bucket", "_count", "_sum"))
    return names


def test_every_metric_the_alerts_and_the_dashboard_name_is_exported() -> None:
    named = {name for alert in alerts.alerts() for name in METRIC.findall(alert.expr)}
    named |= {name for query in dashboard.queries() for name in METRIC.findall(query)}
    assert named, "the pattern no longer finds metric names"
    assert named - exported() == set()


@pytest.fixture(scope="session")
def promtool() -> Iterator[Path]:
    """Prometheus's promtool, built once from the Go module proxy (`make promtool`)."""
    from promtool import install

    install.ensure_installed()
    yield install.binary()


def check(promtool: Path, *args: str) -> None:
    done = subprocess.run([str(promtool), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_accepts_the_rules_and_every_dashboard_query(promtool: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(prometheus_rule()["spec"]))
    check(promtool, "check", "rules", str(rules))
    queries = [q.replace("$namespace", "shop").replace("$app", "clicks") for q in dashboard.queries()]
    recorded = [{"record": f"dashboard:query{n}", "expr": q} for n, q in enumerate(queries)]
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": recorded}]}))
    check(promtool, "check", "rules", str(tmp_path / "dashboard.yaml"))


def expected(name: str, labels: dict[str, str], value: str) -> dict[str, Any]:
    """The alert promtool should report: its labels, and its annotations as Prometheus expands them."""
    alert = next(a for a in alerts.alerts() if a.name == name)

    def expand(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)
        return text.replace("{{ $value }}", value)

    return {
        "exp_labels": {**labels, "severity": alert.severity},
        "exp_annotations": {"summary": expand(alert.summary), "description": expand(alert.description)},
    }


def case(series: dict[str, str], checks: list[tuple[str, str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """One promtool test: input series (`name{labels}` → values) and alerts expected at eval times."""
    return {
        "interval": "1m",
        "input_series": [{"series": name, "values": values} for name, values in series.items()],
        "alert_rule_test": [
            {"eval_time": at, "alertname": name, "exp_alerts": firing} for name, at, firing in checks
        ],
    }


def test_each_alert_fires_when_it_should_and_only_then(promtool: Path, tmp_path: Path) -> None:
    app = {"namespace": "shop", "app": "clicks"}
    lag = f"streamapp_input_lag_records{{{LABELS}}}"
    commit = f'streamapp_executor_last_commit_timestamp_seconds{{{LABELS}, pod="clicks-0", task="3"}}'
    tests = [
        # A lag above the threshold that keeps growing fires after 15 minutes; a flat one never does.
        case(
            {lag: "150000+1000x40"},
            [
                ("StreamAppInputLagGrowing", "10m", []),
                ("StreamAppInputLagGrowing", "35m", [expected("StreamAppInputLagGrowing", app, "185000")]),
            ],
        ),
        case({lag: "150000x40"}, [("StreamAppInputLagGrowing", "35m", [])]),
        case({lag: "1000+1000x40"}, [("StreamAppInputLagGrowing", "35m", [])]),
        # Tasks held for a lost member: after 10 minutes.
        case(
            {
                f'streamapp_tasks{{{LABELS}, state="reserved"}}': "2x30",
                f'streamapp_tasks{{{LABELS}, state="active"}}': "10x30",
            },
            [
                ("StreamAppTasksHeld", "5m", []),
                ("StreamAppTasksHeld", "15m", [expected("StreamAppTasksHeld", app, "2")]),
                ("StreamAppTasksUnassigned", "15m", []),
            ],
        ),
        case({f'streamapp_tasks{{{LABELS}, state="reserved"}}': "0x30"}, [("StreamAppTasksHeld", "15m", [])]),
        case(
            {f"streamapp_fenced_tasks{{{LABELS}}}": "1x30"},
            [("StreamAppFencedTasks", "10m", [expected("StreamAppFencedTasks", app, "1")])],
        ),
        # No replica leads (one standing by, one scraped but not leading), or none is scraped at all.
        case(
            {'streamapp_leader{pod="op-0"}': "0x30", 'streamapp_leader{pod="op-1"}': "0x30"},
            [("StreamAppOperatorNoLeader", "10m", [expected("StreamAppOperatorNoLeader", {}, "0")])],
        ),
        case(
            {'streamapp_leader{pod="op-0"}': "0x30", 'streamapp_leader{pod="op-1"}': "1x30"},
            [("StreamAppOperatorNoLeader", "10m", [])],
        ),
        # A task whose last commit is 20 minutes old while its app has input waiting; not while the
        # input is idle, nor while it keeps committing.
        case(
            {commit: "0x30", lag: "500x30"},
            [
                (
                    "StreamAppTaskNotCommitting",
                    "20m",
                    [expected("StreamAppTaskNotCommitting", {**app, "pod": "clicks-0", "task": "3"}, "1200")],
                )
            ],
        ),
        case({commit: "0x30", lag: "0x30"}, [("StreamAppTaskNotCommitting", "20m", [])]),
        case({commit: "0+60x30", lag: "500x30"}, [("StreamAppTaskNotCommitting", "20m", [])]),
        case(
            {
                f'streamapp_executor_full_restores_total{{{LABELS}, pod="clicks-1", reason="delta-expired"}}': "0 0 1 1 1"
            },
            [
                (
                    "StreamAppFullRestores",
                    "3m",
                    [
                        expected(
                            "StreamAppFullRestores",
                            {**app, "pod": "clicks-1", "reason": "delta-expired"},
                            "1",
                        )
                    ],
                )
            ],
        ),
    ]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(prometheus_rule()["spec"]))
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    check(promtool, "test", "rules", str(tmp_path / "tests.yaml"))
