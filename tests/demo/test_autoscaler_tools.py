"""The pure parts of the autoscaling test's tools: KEDA's trimmed scaler switch, and the scrape job
derived from the chart's ServiceMonitor."""

from __future__ import annotations

import pytest

from kedatool.build import keep_triggers
from promtool.server import scrape_job

BUILDER = """package scaling

func buildScaler(triggerType string) (scalers.Scaler, error) {
\t// TRIGGERS-START
\tswitch triggerType {
\tcase "activemq":
\t\treturn scalers.NewActiveMQScaler(config)
\tcase "kafka":
\t\treturn scalers.NewKafkaScaler(ctx, config)
\tcase "mongodb":
\t\treturn scalers.NewMongoDBScaler(ctx, config)
\tcase "prometheus":
\t\treturn scalers.NewPrometheusScaler(config)
\tdefault:
\t\treturn nil, fmt.Errorf("no scaler found for type: %s", triggerType)
\t}
\t// TRIGGERS-END
}
"""


def test_only_the_kept_triggers_cases_stay_and_the_default_still_refuses_the_others() -> None:
    trimmed = keep_triggers(BUILDER, ("kafka", "prometheus"))
    assert 'case "kafka":\n\t\treturn scalers.NewKafkaScaler(ctx, config)' in trimmed
    assert 'case "prometheus":\n\t\treturn scalers.NewPrometheusScaler(config)' in trimmed
    assert "ActiveMQ" not in trimmed and "MongoDB" not in trimmed
    assert 'default:\n\t\treturn nil, fmt.Errorf("no scaler found' in trimmed
    assert trimmed.startswith("package scaling\n") and trimmed.rstrip().endswith("}")


@pytest.mark.parametrize(
    ("builder", "error"),
    [
        (BUILDER.replace("// TRIGGERS-START", ""), "markers"),
        (BUILDER.replace('"kafka"', '"apache-kafka"'), "no case for ['kafka']"),
    ],
)
def test_a_switch_laid_out_otherwise_is_refused(builder: str, error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        keep_triggers(builder, ("kafka", "prometheus"))


def test_the_scrape_job_carries_the_service_monitors_endpoint_fields() -> None:
    monitor = {
        "metadata": {"name": "streamapp-operator"},
        "spec": {"endpoints": [{"port": "metrics", "interval": "2s", "honorLabels": True}]},
    }
    assert scrape_job(monitor, "127.0.0.1:9000") == {
        "job_name": "streamapp-operator",
        "honor_labels": True,
        "metrics_path": "/metrics",
        "scheme": "http",
        "scrape_interval": "2s",
        "static_configs": [{"targets": ["127.0.0.1:9000"]}],
    }


def test_without_honor_labels_the_job_does_not_honor_them() -> None:
    monitor = {"metadata": {"name": "m"}, "spec": {"endpoints": [{"port": "metrics"}]}}
    job = scrape_job(monitor, "127.0.0.1:9000")
    assert job["honor_labels"] is False and "scrape_interval" not in job
