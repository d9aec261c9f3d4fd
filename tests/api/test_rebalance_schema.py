"""`spec.rebalance` on the wire agrees with RebalanceConfig, which owns its keys, defaults and ranges."""

from __future__ import annotations

import dataclasses
import re

import pytest

from streamapp.api.fields import camel
from streamapp.api.rebalance import DURATION_PATTERN, MINIMUMS, POSITIVE_DURATIONS, REBALANCE
from streamapp.rebalance.config import ConfigError, RebalanceConfig, parse_duration


def test_keys_and_defaults_are_rebalance_configs() -> None:
    properties = REBALANCE.schema()["properties"]
    assert list(properties) == [camel(f.name) for f in dataclasses.fields(RebalanceConfig)]
    assert {k: p["default"] for k, p in properties.items()} == RebalanceConfig().to_spec()


@pytest.mark.parametrize(("key", "bound"), sorted(MINIMUMS.items()))
def test_cel_minimums_are_rebalance_configs(key: str, bound: int) -> None:
    with pytest.raises(ConfigError, match=key):
        RebalanceConfig.from_spec({key: bound - 1})
    RebalanceConfig.from_spec({key: bound})


def test_every_range_check_of_rebalance_config_has_a_cel_rule() -> None:
    """Each integer key RebalanceConfig refuses below some bound appears in MINIMUMS."""
    for key, default in RebalanceConfig().to_spec().items():
        if isinstance(default, int) and not isinstance(default, bool):
            with pytest.raises(ConfigError):
                RebalanceConfig.from_spec({key: -1})
            assert key in MINIMUMS


@pytest.mark.parametrize("text", ["5m", "30s", "1h30m", "250ms", "1.5h", "0s", "10m0s"])
def test_duration_pattern_accepts_what_the_engine_parses(text: str) -> None:
    assert re.search(DURATION_PATTERN, text)
    parse_duration(text)


@pytest.mark.parametrize("text", ["5 minutes", "", "-1s", "1d", "300", "5M", "m"])
def test_duration_pattern_refuses_non_go_durations(text: str) -> None:
    assert not re.search(DURATION_PATTERN, text)


def test_zero_probing_interval_is_refused_like_the_engine_does() -> None:
    for key in POSITIVE_DURATIONS:
        with pytest.raises(ConfigError, match=key):
            RebalanceConfig.from_spec({key: "0s"})
