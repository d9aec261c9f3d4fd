"""`spec.rebalance` on the wire: one model states every key, default and check, and the API server and the
operator (and the simulator) refuse the same values with the same key named."""

from __future__ import annotations

import dataclasses
import re

import pytest

from streamapp.api.fields import ValidationError, camel
from streamapp.api.rebalance import DURATION_PATTERN, REBALANCE
from streamapp.rebalance.config import RebalanceConfig
from streamapp.units import parse_duration


def test_keys_and_defaults_are_the_engines() -> None:
    properties = REBALANCE.schema()["properties"]
    assert list(properties) == [camel(f.name) for f in dataclasses.fields(RebalanceConfig)]
    assert {k: p["default"] for k, p in properties.items()} == RebalanceConfig().to_spec()
    assert REBALANCE.decode({}, "spec.rebalance") == RebalanceConfig()


def test_a_block_decodes_into_the_engines_units_and_back() -> None:
    config = REBALANCE.decode(
        {"protocol": "cooperative", "scheduledRebalanceMaxDelay": "2m", "standbyReplicas": 1}, "rebalance"
    )
    assert config.protocol == "cooperative" and config.scheduled_rebalance_max_delay == 120.0
    assert config.standby_replicas == 1 and config.max_warmup_replicas == 2
    assert REBALANCE.decode(REBALANCE.encode(config), "rebalance") == config


@pytest.mark.parametrize(
    ("spec", "path", "problem"),
    [
        ({"protocol": "sticky"}, "protocol", "expected one of"),
        ({"lostTaskRecovery": "never"}, "lostTaskRecovery", "expected one of"),
        ({"maxWarmupReplicas": 0}, "maxWarmupReplicas", ">= 1"),
        ({"maxWarmupReplicasTotal": -1}, "maxWarmupReplicasTotal", ">= 0"),
        ({"acceptableRecoveryLag": -1}, "acceptableRecoveryLag", ">= 0"),
        ({"handoffLag": -1}, "handoffLag", ">= 0"),
        ({"standbyReplicas": -1}, "standbyReplicas", ">= 0"),
        ({"standbyReplicas": "1"}, "standbyReplicas", "expected"),
        ({"failoverToStandby": "yes"}, "failoverToStandby", "expected"),
        ({"scheduledRebalanceMaxDelay": "5 minutes"}, "scheduledRebalanceMaxDelay", "duration such as"),
        ({"scheduledRebalanceMaxDelay": 300}, "scheduledRebalanceMaxDelay", "expected"),
        ({"flapWindow": "721h"}, "flapWindow", "at most 720h"),
        ({"probingRebalanceInterval": "0s"}, "probingRebalanceInterval", "> 0"),
        ({"revocationTimeout": "0m"}, "revocationTimeout", "> 0"),
    ],
)
def test_a_bad_value_is_refused_naming_its_key(spec: dict[str, object], path: str, problem: str) -> None:
    with pytest.raises(ValidationError) as refused:
        REBALANCE.decode(spec, "spec.rebalance")
    assert refused.value.path == f"spec.rebalance.{path}" and problem in refused.value.problem


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"unknown field.*maxWarmupReplica"):
        REBALANCE.decode({"maxWarmupReplica": 2}, "spec.rebalance")


def test_zero_is_a_valid_delay_window_and_timeout() -> None:
    config = REBALANCE.decode(
        {"scheduledRebalanceMaxDelay": "0s", "flapWindow": "0s", "batchTimeout": "0s"}, "spec.rebalance"
    )
    assert (config.scheduled_rebalance_max_delay, config.flap_window, config.batch_timeout) == (0, 0, 0)


@pytest.mark.parametrize("text", ["5m", "30s", "1h30m", "250ms", "1.5h", "0s", "10m0s"])
def test_duration_pattern_accepts_what_the_engine_parses(text: str) -> None:
    assert re.search(DURATION_PATTERN, text)
    parse_duration(text)


@pytest.mark.parametrize("text", ["5 minutes", "", "-1s", "1d", "300", "5M", "m"])
def test_duration_pattern_refuses_non_go_durations(text: str) -> None:
    assert not re.search(DURATION_PATTERN, text)
