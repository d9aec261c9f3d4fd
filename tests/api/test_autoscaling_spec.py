"""`spec.autoscaling` on the wire: off by default, one model checks it, the engine gets its units."""

from __future__ import annotations

from typing import Any

import pytest
from api_samples import app

from streamapp.api import StreamApp, ValidationError
from streamapp.api.autoscaling import Autoscaling
from streamapp.rebalance.autoscaler import AutoscalerConfig
from streamapp.render.crd import crds


def test_off_by_default_and_decoded_into_the_engines_units() -> None:
    assert StreamApp.from_resource(app()).spec.autoscaling.config() == AutoscalerConfig()
    assert not AutoscalerConfig().enabled
    block = {
        "enabled": True,
        "minReplicas": 2,
        "maxReplicas": 6,
        "target": {"utilization": 70, "lagSeconds": 20},
        "scaleInHeadroom": 15,
        "settleTimeout": "5m",
    }
    assert Autoscaling.from_dict(block).config() == AutoscalerConfig(True, 2, 6, 0.7, 20.0, 0.15, 300.0)


@pytest.mark.parametrize(
    ("autoscaling", "spec", "path"),
    [
        ({"minReplicas": 0}, {}, "spec.autoscaling.minReplicas"),
        ({"minReplicas": 4, "maxReplicas": 3}, {}, "spec.autoscaling.minReplicas"),
        ({"maxReplicas": 13}, {}, "spec.autoscaling.maxReplicas"),
        ({"minReplicas": 13}, {}, "spec.autoscaling.minReplicas"),
        ({"target": {"utilization": 0}}, {}, "spec.autoscaling.target.utilization"),
        ({"target": {"utilization": 101}}, {}, "spec.autoscaling.target.utilization"),
        ({"target": {"lagSeconds": 0}}, {}, "spec.autoscaling.target.lagSeconds"),
        ({"scaleInHeadroom": 101}, {}, "spec.autoscaling.scaleInHeadroom"),
        ({"settleTimeout": "0s"}, {}, "spec.autoscaling.settleTimeout"),
        ({"settleTimeout": "ten minutes"}, {}, "spec.autoscaling.settleTimeout"),
        ({"cooldown": "5m"}, {}, "spec.autoscaling"),
        (
            {"enabled": True, "minReplicas": 1},
            {"rebalance": {"standbyReplicas": 1}},
            "spec.autoscaling.minReplicas",
        ),
    ],
)
def test_nonsense_is_refused_naming_the_field(
    autoscaling: dict[str, Any], spec: dict[str, Any], path: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        StreamApp.from_resource(app(autoscaling=autoscaling, **spec), served=False)
    assert refused.value.path == path


def test_standbys_need_more_members_only_once_the_autoscaler_may_scale_in_to_the_minimum() -> None:
    """A disabled block's minReplicas binds nothing: the user's replicas do."""
    body = app(replicas=3, rebalance={"standbyReplicas": 1}, autoscaling={"minReplicas": 1})
    assert not StreamApp.from_resource(body).spec.autoscaling.enabled


def test_the_crd_states_the_same_rules() -> None:
    streamapp = next(d for d in crds() if d["spec"]["names"]["kind"] == "StreamApp")
    spec = streamapp["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    block = spec["properties"]["autoscaling"]
    assert block["default"] == {}
    assert block["properties"]["enabled"]["default"] is False
    assert block["properties"]["target"]["properties"]["utilization"]["maximum"] == 100
    messages = {rule["message"] for rule in spec["x-kubernetes-validations"]}
    assert any(m.startswith("autoscaling.maxReplicas must be at most partitions") for m in messages)
    assert any(
        m.startswith("rebalance.standbyReplicas must be less than autoscaling.minReplicas") for m in messages
    )
