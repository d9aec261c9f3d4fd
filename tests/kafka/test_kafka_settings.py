"""Kafka endpoints from the StreamApp to the member pod: credentials only through a Secret reference."""

from __future__ import annotations

import json

from streamapp.api.kafka import KafkaTopic, secret_env
from streamapp.executor.podsettings import PodSettings

KAFKA = {"bootstrapServers": "kafka-0:9092,kafka-1:9092", "topic": "clicks"}
ENV = {
    "STREAMAPP_APP": "counts",
    "STREAMAPP_NAMESPACE": "ns",
    "STREAMAPP_MEMBER_ID": "0",
    "STREAMAPP_POD_UID": "uid-0",
    "STREAMAPP_PARTITIONS": "6",
    "STREAMAPP_PIPELINE": json.dumps(
        {
            "transform": "streamapp.executor.samples.counts:counts",
            "source": {"type": "kafka", "kafka": {**KAFKA, "properties": {"security.protocol": "SASL_SSL"}}},
            "sink": {"type": "kafka", "kafka": {**KAFKA, "topic": "counts", "exactlyOnce": False}},
            "stateStore": {"uri": "file:///data/state"},
        }
    ),
    "STREAMAPP_KAFKA_SOURCE_USERNAME": "reader",
    "STREAMAPP_KAFKA_SOURCE_PASSWORD": "s3cret",
}


def test_the_pod_reads_kafka_endpoints_and_secret_credentials_from_its_environment() -> None:
    settings = PodSettings.from_env(ENV)
    assert settings.log_path is None and settings.partitions == 6
    assert settings.kafka_source is not None and settings.kafka_sink is not None
    assert settings.kafka_source.topic == "clicks"
    assert settings.kafka_source.config()["bootstrap.servers"] == "kafka-0:9092,kafka-1:9092"
    assert dict(settings.kafka_source.properties) == {
        "security.protocol": "SASL_SSL",
        "sasl.username": "reader",
        "sasl.password": "s3cret",
    }
    assert settings.kafka_sink.topic == "counts" and dict(settings.kafka_sink.properties) == {}
    assert settings.exactly_once is False


def test_credentials_reach_the_pod_as_secret_key_refs_only() -> None:
    topic = KafkaTopic.from_dict({**KAFKA, "credentials": {"secretName": "kafka-users", "passwordKey": "pw"}})
    assert secret_env(topic, "sink") == [
        {
            "name": "STREAMAPP_KAFKA_SINK_USERNAME",
            "valueFrom": {"secretKeyRef": {"name": "kafka-users", "key": "username"}},
        },
        {
            "name": "STREAMAPP_KAFKA_SINK_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "kafka-users", "key": "pw"}},
        },
    ]
    assert secret_env(KafkaTopic.from_dict(KAFKA), "source") == []
