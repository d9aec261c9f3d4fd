"""What the Kafka source and sink share: where the broker is, client settings, and topic metadata.

The executor talks to Kafka through librdkafka (the `confluent-kafka` wheel bundles it): by explicit
partition and offset, never through a consumer group, because the operator is the group leader and the
commit manifest, not Kafka, holds the consumed offsets.

Credentials never appear in the StreamApp: the operator passes the referenced Secret's keys to the pod
as environment variables (`api.kafka.credential_env`), and `credentials` turns them into client
properties here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from streamapp.api.kafka import credential_env

METADATA_TIMEOUT_S = 30.0
LEADERSHIP_ERRORS = frozenset(
    {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART}
)
"""Broker answers that mean "not yet": a partition whose leader is being elected or moved, or a topic
just created that the broker asked has not taken up. librdkafka does not mark them retriable when it
raises them from a watermark query, so `watermarks` retries them itself."""
RETRY_PAUSE_S = 0.2


@dataclass(frozen=True)
class KafkaEndpoint:
    """One topic on one cluster, with the client properties every client of it gets."""

    bootstrap_servers: str
    topic: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings: the endpoint's properties under the caller's fixed ones (`extra`)."""
        return {**self.properties, "bootstrap.servers": self.bootstrap_servers, **extra}


def credentials(env: Mapping[str, str], role: str) -> dict[str, str]:
    """Client properties from the credential variables of `role` ("source" or "sink"); pure.

    Only the variables present count, so an endpoint without a Secret gets no properties.
    """
    return {prop: env[name] for prop, name in credential_env(role).items() if env.get(name)}


def endpoint_from_spec(spec: Mapping[str, Any], env: Mapping[str, str], role: str) -> KafkaEndpoint:
    """The endpoint a pipeline's `kafka` object describes (wire form), with credentials from `env`."""
    properties = {str(k): str(v) for k, v in (spec.get("properties") or {}).items()}
    return KafkaEndpoint(
        bootstrap_servers=str(spec["bootstrapServers"]),
        topic=str(spec["topic"]),
        properties={**properties, **credentials(env, role)},
    )


class PartitionMismatch(ValueError):
    """The topic's partition count differs from the app's `partitions`: tasks and partitions are 1:1."""


def partition_count(endpoint: KafkaEndpoint) -> int:
    """Partitions of the endpoint's topic; raises when the topic does not exist."""
    consumer = Consumer(endpoint.config(**{"group.id": "streamapp-metadata", "enable.auto.commit": False}))
    try:
        metadata = consumer.list_topics(endpoint.topic, timeout=METADATA_TIMEOUT_S)
    finally:
        consumer.close()
    topic = metadata.topics.get(endpoint.topic)
    if topic is None or topic.error is not None:
        reason = topic.error if topic is not None else "not in the metadata"
        raise PartitionMismatch(f"Kafka topic {endpoint.topic!r} is not readable: {reason}")
    return len(topic.partitions)


def check_partitions(endpoint: KafkaEndpoint, partitions: int) -> None:
    """Refuse a topic whose partition count is not the app's `partitions` (with the numbers)."""
    found = partition_count(endpoint)
    if found != partitions:
        raise PartitionMismatch(
            f"Kafka topic {endpoint.topic!r} has {found} partitions but spec.partitions is {partitions}: "
            "each task reads exactly one partition, so they must be equal"
        )


def ensure_topic(endpoint: KafkaEndpoint, partitions: int, **topic_config: str) -> None:
    """Create the topic when absent (an existing one is left as it is)."""
    admin = AdminClient(endpoint.config())
    futures = admin.create_topics(
        [NewTopic(endpoint.topic, num_partitions=partitions, replication_factor=-1, config=topic_config)],
        operation_timeout=METADATA_TIMEOUT_S,
    )
    try:
        futures[endpoint.topic].result()
    except KafkaException as error:
        if error.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise


def watermarks(consumer: Consumer, where: TopicPartition) -> tuple[int, int]:
    """Low and high watermark of one partition, asked of its leader (never from a cache). An answer in
    `LEADERSHIP_ERRORS` is asked again until `METADATA_TIMEOUT_S` has passed, so a marker topic the sink
    has just created, or a leader election, does not fail the batch that first meets it."""
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while True:
        try:
            left = max(RETRY_PAUSE_S, deadline - time.monotonic())
            low, high = consumer.get_watermark_offsets(where, timeout=left, cached=False)
            return int(low), int(high)
        except KafkaException as error:
            if error.args[0].code() not in LEADERSHIP_ERRORS or time.monotonic() >= deadline:
                raise
        time.sleep(RETRY_PAUSE_S)
