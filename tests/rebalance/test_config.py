"""Durations as every setting spells them, and the engine's block in its own units."""

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


@pytest.mark.parametrize("bad", ["5 minutes", "", "-1s", True, None, "1d", "721h"])
def test_bad_durations_name_the_key(bad: object) -> None:
    with pytest.raises(ConfigError, match="scheduledRebalanceMaxDelay"):
        parse_duration(bad, "scheduledRebalanceMaxDelay")


def test_the_engines_block_spells_durations_the_go_way() -> None:
    spec = RebalanceConfig(scheduled_rebalance_max_delay=120.0, batch_timeout=0.25).to_spec()
    assert spec["scheduledRebalanceMaxDelay"] == "2m" and spec["batchTimeout"] == "250ms"
    assert spec["flapWindow"] == "10m" and spec["maxWarmupReplicas"] == 2
    assert format_duration(600.0) == "10m"
