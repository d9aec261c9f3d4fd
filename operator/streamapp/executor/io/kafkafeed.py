"""Synthetic input produced to a Kafka topic: `streamapp generate --kafka`, the feed of the Kafka sample.

The records are the file log generator's (`generate.make_records`), each sent to partition
`crc32(key) mod partitions`, so a key always lands in one task and the topic holds the same stream a
file log would. The feed starts at the topic's end (the sum of its partitions' high watermarks): a
producer restarted by its Deployment continues the stream instead of repeating it. Each chunk is
flushed before the next is written, and a stop waits for the chunk in hand, so the topic always holds
a prefix of the stream. Idempotent producing keeps a retried send from writing a record twice.

Why it exists: a sample that needs no shared volume must bring its own input, and its topics, to a
cluster that has only a broker; the feed creates the topics it is told to (`ensure_topics`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from streamapp.executor.io.generate import GenerateSpec, make_records, split_by_partition
from streamapp.executor.io.kafkaclient import (
    KafkaEndpoint,
    check_partitions,
    ensure_topic,
    watermarks,
)

FLUSH_TIMEOUT_S = 60.0


def ensure_topics(endpoint: KafkaEndpoint, names: Iterable[str], partitions: int) -> None:
    """Create each named topic on the endpoint's cluster with `partitions` partitions when it is absent;
    an existing one with another count is refused, naming both counts (tasks and partitions are 1:1)."""
    for name in names:
        topic = KafkaEndpoint(endpoint.bootstrap_servers, name, endpoint.properties)
        ensure_topic(topic, partitions)
        check_partitions(topic, partitions)


class KafkaFeed:
    """Writes the stream's records to one topic, a chunk at a time (`generate.pace`'s `append`)."""

    def __init__(self, endpoint: KafkaEndpoint, spec: GenerateSpec) -> None:
        self.endpoint, self.spec = endpoint, spec
        self.producer = Producer(endpoint.config(**{"enable.idempotence": True, "linger.ms": 20}))
        self.failures: list[KafkaError] = []

    def end(self) -> int:
        """Records the topic holds: where the stream continues."""
        consumer = Consumer(
            self.endpoint.config(**{"group.id": "streamapp-feed", "enable.auto.commit": False})
        )
        try:
            return sum(
                watermarks(consumer, TopicPartition(self.endpoint.topic, p))[1]
                for p in range(self.spec.partitions)
            )
        finally:
            consumer.close()

    def append(self, start: int, count: int, now: datetime) -> None:
        """Send records `start .. start+count-1`, stamped `now`, and wait until the broker has them all;
        raises when any was not delivered."""
        keys, values = make_records(self.spec.seed, start, count, self.spec.keys)
        stamp = int(now.timestamp() * 1000)
        for partition, (ks, vs) in sorted(split_by_partition(keys, values, self.spec.partitions).items()):
            for key, value in zip(ks, vs, strict=True):
                self._send(partition, key, value, stamp)
        if self.producer.flush(FLUSH_TIMEOUT_S) > 0:
            raise TimeoutError(f"records to {self.endpoint.topic} not delivered in {FLUSH_TIMEOUT_S:.0f} s")
        if self.failures:
            raise RuntimeError(f"records to {self.endpoint.topic} not delivered: {self.failures[0]}")

    def _send(self, partition: int, key: str, value: str, stamp: int) -> None:
        while True:
            try:
                self.producer.produce(
                    self.endpoint.topic,
                    key=key,
                    value=value,
                    partition=partition,
                    timestamp=stamp,
                    on_delivery=self._delivered,
                )
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.1)

    def _delivered(self, error: KafkaError | None, _: Message) -> None:
        if error is not None:
            self.failures.append(error)
