"""The engine's `rebalance` block in its own units, spelled back the way the wire writes it."""

from __future__ import annotations

from streamapp.rebalance import RebalanceConfig


def test_the_engines_block_spells_durations_the_go_way() -> None:
    spec = RebalanceConfig(scheduled_rebalance_max_delay=120.0, batch_timeout=0.25).to_spec()
    assert spec["scheduledRebalanceMaxDelay"] == "2m" and spec["batchTimeout"] == "250ms"
    assert spec["flapWindow"] == "10m" and spec["maxWarmupReplicas"] == 2


def test_only_the_state_aware_protocol_is_state_aware() -> None:
    assert RebalanceConfig().state_aware
    assert not RebalanceConfig(protocol="cooperative").state_aware
    assert not RebalanceConfig(protocol="eager").state_aware
