"""Input produced to, and output read back from, the test broker.

Input records are the same pure function of (seed, index) as the file log generator's
(`streamapp.executor.io.generate.make_records`), each sent to partition crc32(key) mod partitions, so a
key always lands in one task. Output is read with `read_committed`, as the exactly-once contract states.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import Consumer, KafkaError, TopicPartition

from streamapp.executor.io.generate import GenerateSpec
from streamapp.executor.io.kafkaclient import KafkaEndpoint
from streamapp.executor.io.kafkafeed import KafkaFeed

READ_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: str
    value: str
    headers: tuple[tuple[str, bytes], ...] = ()

    def header(self, name: str) -> str:
        return next(value.decode() for key, value in self.headers if key == name)


def produce(
    bootstrap: str, topic: str, partitions: int, seed: int, start: int, count: int, keys: int
) -> None:
    """Records `start .. start+count-1` of the seeded stream, flushed before returning: the product's own
    feed (`streamapp generate --kafka`) writes them."""
    spec = GenerateSpec(partitions=partitions, count=None, keys=keys, seed=seed)
    feed = KafkaFeed(KafkaEndpoint(bootstrap, topic), spec)
    feed.append(start, count, datetime.now(UTC))


def read_all(bootstrap: str, topic: str, committed: bool = True) -> list[Record]:
    """Every readable record of every partition of `topic`, in offset order per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "streamapp-test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics[topic].partitions
        ends = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), READ_TIMEOUT_S, cached=False)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        found: list[Record] = []
        waiting = set(ends)
        while waiting:
            message = consumer.poll(READ_TIMEOUT_S)
            if message is None:
                raise TimeoutError(f"reading {topic}: partitions {sorted(waiting)} not at their end")
            error = message.error()
            partition = message.partition() or 0
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(str(error))
                if (message.offset() or 0) >= ends[partition]:
                    waiting.discard(partition)
                continue
            found.append(_record(message))
        return found
    finally:
        consumer.close()


def _record(message: object) -> Record:
    key, value = message.key(), message.value()  # type: ignore[attr-defined]
    return Record(
        partition=message.partition(),  # type: ignore[attr-defined]
        offset=message.offset(),  # type: ignore[attr-defined]
        key=key.decode() if key is not None else "",
        value=value.decode() if value is not None else "",
        headers=tuple(message.headers() or ()),  # type: ignore[attr-defined]
    )
