"""A Kafka topic as the `Source`: partition P of the topic is task P's input, read by explicit offsets.

Each read assigns the one partition at `start` (never joining a consumer group: the commit manifest holds
the position) and consumes until `end`, building the record columns as Arrow, which
Spark takes without a per-row conversion. `end_offset` asks the broker for the last stable offset
(`isolation.level=read_committed`), so transactional input is read only once committed, and aborted
records are skipped — offsets then have gaps, which the `[start, end)` contract allows.

With a `group` (the app's, `api.names.consumer_group`), each position an owner commits is also committed
to that consumer group, asynchronously, so Kafka's lag tooling sees the app as it sees any consumer.
Nothing reads it back; a commit that fails is logged and the next one replaces it.

Why a client library rather than Spark's Kafka batch source: see docs/pipelines.md ("Kafka in and out") and
bench/results/kafka.md — a micro-batch of one partition is small, and the Python client avoids a Spark
job (and the JVM consumer pool) per batch.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from pyspark.sql import DataFrame, SparkSession

from streamapp.executor.io.kafkaclient import KafkaEndpoint, watermarks
from streamapp.executor.io.source import RECORD_SCHEMA, arrow_frame

log = logging.getLogger(__name__)
FETCH_BATCH = 10_000
POLL_TIMEOUT_S = 1.0
READ_TIMEOUT_S = 120.0


class KafkaSource:
    """Reads exactly the offsets asked for from one topic (see the module docstring).

    A round reads its partitions side by side (`batches.READERS`), so each read borrows a consumer of
    its own from a pool that grows to the number of reads at once; one consumer behind one lock made
    the partitions of a round wait for each other's fetches.
    """

    def __init__(self, endpoint: KafkaEndpoint, group: str | None = None) -> None:
        self.endpoint = endpoint
        self.group = group
        self._lock = threading.Lock()
        self._idle: list[Consumer] = []
        self._all: list[Consumer] = []
        # Per partition, the span `keys_in_process` fetched and its records, for the read that follows.
        self._fetched: dict[int, tuple[int, int, pa.Table]] = {}

    def _new_consumer(self) -> Consumer:
        return Consumer(
            self.endpoint.config(
                **{
                    # Required; never joined. Positions are committed to it only with a group.
                    "group.id": self.group or f"streamapp-unused-{self.endpoint.topic}",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                    "fetch.wait.max.ms": 50,
                    "on_commit": _log_failed_commit,
                }
            )
        )

    @contextlib.contextmanager
    def _consumer(self) -> Iterator[Consumer]:
        """An idle consumer of the pool, or a new one when every one is reading."""
        with self._lock:
            consumer = self._idle.pop() if self._idle else None
        if consumer is None:
            consumer = self._new_consumer()
            with self._lock:
                self._all.append(consumer)
        try:
            yield consumer
        finally:
            with self._lock:
                self._idle.append(consumer)

    def end_offset(self, partition: int) -> int:
        with self._consumer() as consumer:
            _, high = watermarks(consumer, TopicPartition(self.endpoint.topic, partition))
        return int(high)

    def read(self, spark: SparkSession, partition: int, start: int, end: int) -> DataFrame:
        return arrow_frame(spark, self.read_in_process(partition, start, end))

    def read_in_process(self, partition: int, start: int, end: int) -> pa.Table:
        """`ReadsInProcess`: every span is fetched here (`read` does the same), once: a span whose keys
        were read ahead is not fetched again."""
        with self._lock:
            fetched = self._fetched.pop(partition, None)
        if fetched is not None and fetched[:2] == (start, end):
            return fetched[2]
        return self.read_arrow(partition, start, end)

    def keys_in_process(self, partition: int, start: int, end: int) -> list[str]:
        """`ReadsKeysAhead`: the span is fetched now and kept for the read that follows."""
        records = self.read_arrow(partition, start, end)
        with self._lock:
            self._fetched[partition] = (start, end, records)
        return list(pc.unique(records["key"]).to_pylist())

    def read_arrow(self, partition: int, start: int, end: int) -> pa.Table:
        """Records with `start <= offset < end` as an Arrow table of the record columns."""
        if end <= start:
            return RECORD_SCHEMA.empty_table()
        with self._consumer() as consumer:
            messages = self._fetch(consumer, partition, start, end)
        return records_table(messages)

    def report_position(self, partition: int, offset: int) -> None:
        """Commit `offset` for `partition` to the app's consumer group (`ReportsPosition`), without
        waiting; nothing without a group."""
        if self.group is None:
            return
        with self._consumer() as consumer:
            consumer.commit(
                offsets=[TopicPartition(self.endpoint.topic, partition, offset)], asynchronous=True
            )

    def close(self) -> None:
        with self._lock:
            consumers, self._all, self._idle = self._all, [], []
        for consumer in consumers:
            consumer.close()

    def _fetch(self, consumer: Consumer, partition: int, start: int, end: int) -> list[Message]:
        """Consume from `start` until offset `end - 1` or the partition's end at or past `end` (the
        last offsets may be transaction markers, which carry no record)."""
        consumer.assign([TopicPartition(self.endpoint.topic, partition, start)])
        kept: list[Message] = []
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=READ_TIMEOUT_S)
        try:
            while dt.datetime.now(dt.UTC) < deadline:
                for message in consumer.consume(min(FETCH_BATCH, end - start), POLL_TIMEOUT_S):
                    error = message.error()
                    if error is None:
                        offset = message.offset() or 0
                        if offset < end:
                            kept.append(message)
                        if offset >= end - 1:
                            return kept
                    elif error.code() == KafkaError._PARTITION_EOF:
                        if (message.offset() or 0) >= end:
                            return kept
                    else:
                        raise RuntimeError(f"reading {self.endpoint.topic}[{partition}]: {error}")
        finally:
            consumer.unassign()
        raise TimeoutError(
            f"{self.endpoint.topic}[{partition}]: offsets [{start}, {end}) not all readable after "
            f"{READ_TIMEOUT_S:.0f}s (got {len(kept)})"
        )


def _log_failed_commit(error: KafkaError | None, partitions: list[TopicPartition]) -> None:
    if error is not None:
        log.warning("committing positions %s to the consumer group failed: %s", partitions, error)


def records_table(messages: list[Message]) -> pa.Table:
    """The record columns of consumed messages; pure. Keys and values are UTF-8 text in this data plane."""
    offsets = [m.offset() for m in messages]
    stamps = [dt.datetime.fromtimestamp(m.timestamp()[1] / 1000, dt.UTC) for m in messages]
    keys = [_text(m.key()) for m in messages]
    values = [_text(m.value()) for m in messages]
    return pa.table([offsets, stamps, keys, values], schema=RECORD_SCHEMA)


def _text(data: str | bytes | None) -> str | None:
    if data is None or isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")
