"""`spec.rollingUpdate` on the wire: one model checks it, the engine gets its units and defaults."""

from __future__ import annotations

import pytest

from streamapp.api.fields import ValidationError
from streamapp.api.rollingupdate import RollingUpdate
from streamapp.rebalance.rollout import RolloutConfig


def test_the_block_decodes_into_the_engines_units() -> None:
    block = {"strategy": "handoff", "maxUnavailable": 2, "handoffTimeout": "90s"}
    assert RollingUpdate.from_dict(block).config() == RolloutConfig("handoff", 2, False, 90.0)
    assert RollingUpdate.from_dict({}).config() == RolloutConfig()


@pytest.mark.parametrize(
    ("block", "path"),
    [
        ({"maxUnavailable": 0}, "spec.rollingUpdate.maxUnavailable"),
        ({"strategy": "surge"}, "spec.rollingUpdate.strategy"),
        ({"handoffTimeout": "10 minutes"}, "spec.rollingUpdate.handoffTimeout"),
        ({"handoffTimeout": "721h"}, "spec.rollingUpdate.handoffTimeout"),
        ({"maxSurge": 1}, "spec.rollingUpdate"),
    ],
)
def test_nonsense_is_refused_naming_the_field(block: dict[str, object], path: str) -> None:
    with pytest.raises(ValidationError) as refused:
        RollingUpdate.from_dict(block)
    assert refused.value.path == path
