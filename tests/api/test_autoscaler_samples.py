"""The autoscaler samples point at what the CRD and the operator really offer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from streamapp.api.names import consumer_group
from streamapp.controller.metrics import INPUT_LAG_METRIC
from streamapp.render.crd import crds

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"


def sample(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return loaded


@pytest.mark.parametrize(
    "name", ["hpa.yaml", "keda-prometheus/scaledobject.yaml", "keda-kafka/scaledobject.yaml"]
)
def test_the_scale_target_is_a_streamapp_with_a_scale_subresource(name: str) -> None:
    target = sample(name)["spec"]["scaleTargetRef"]
    crd = next(d for d in crds() if d["spec"]["names"]["kind"] == target["kind"])
    group, version = target["apiVersion"].split("/")
    assert (group, version) == (crd["spec"]["group"], crd["spec"]["versions"][0]["name"])
    assert "scale" in crd["spec"]["versions"][0]["subresources"]


def test_both_scale_on_the_operators_input_lag_metric() -> None:
    hpa = sample("hpa.yaml")["spec"]["metrics"][0]["object"]
    assert hpa["metric"]["name"] == INPUT_LAG_METRIC
    assert hpa["describedObject"] == sample("hpa.yaml")["spec"]["scaleTargetRef"]
    trigger = sample("keda-prometheus/scaledobject.yaml")["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus" and INPUT_LAG_METRIC in trigger["metadata"]["query"]


def test_the_kafka_trigger_reads_the_group_the_executors_commit_to() -> None:
    scaled = sample("keda-kafka/scaledobject.yaml")
    documents = yaml.safe_load_all((SAMPLES / "kafka" / "streamapp-kafka.yaml").read_text())
    target = next(d for d in documents if d and d["kind"] == "StreamApp")
    assert scaled["spec"]["scaleTargetRef"]["name"] == target["metadata"]["name"]
    trigger = scaled["spec"]["triggers"][0]["metadata"]
    source = target["spec"]["pipeline"]["source"]["kafka"]
    assert trigger["consumerGroup"] == consumer_group("default", target["metadata"]["name"])
    assert (trigger["topic"], trigger["bootstrapServers"]) == (source["topic"], source["bootstrapServers"])
    assert scaled["spec"]["maxReplicaCount"] == target["spec"]["partitions"]
