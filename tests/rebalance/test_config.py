"""Parsing and validation of the `rebalance` block shared by StreamApps and scenarios."""

from __future__ import annotations

import pytest

from streamapp.rebalance import ConfigError, RebalanceConfig
from streamapp.rebalance.config import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300), ("30s", 30), ("1h30m", 5400), ("250ms", 0.25), (90, 90), ("45", 45)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["5 minutes", "", "-1s", True, None, "1d"])
def test_bad_durations_name_the_key(bad: object) -> None:
    with pytest.raises(ConfigError, match="scheduledRebalanceMaxDelay"):
        RebalanceConfig.from_spec({"scheduledRebalanceMaxDelay": bad})


def test_spec_round_trip_and_defaults() -> None:
    spec = {"protocol": "cooperative", "scheduledRebalanceMaxDelay": "2m", "standbyReplicas": 1}
    config = RebalanceConfig.from_spec(spec)
    assert config.scheduled_rebalance_max_delay == 120 and config.max_warmup_replicas == 2
    assert RebalanceConfig.from_spec(config.to_spec()) == config
    assert format_duration(600.0) == "10m"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"protocol": "sticky"}, "protocol"),
        ({"maxWarmupReplicas": 0}, "maxWarmupReplicas"),
        ({"maxWarmupReplicasTotal": -1}, "maxWarmupReplicasTotal"),
        ({"acceptableRecoveryLag": -1}, "acceptableRecoveryLag"),
        ({"standbyReplicas": "1"}, "standbyReplicas"),
        ({"failoverToStandby": "yes"}, "failoverToStandby"),
        ({"maxWarmupReplica": 2}, "unknown key"),
    ],
)
def test_invalid_values_are_rejected_with_the_key(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RebalanceConfig.from_spec(spec)
