"""A Kafka topic as the sink, exactly-once as seen by a `read_committed` consumer.

The commit manifest stays the commit point. `write` stages a batch's rows as a Parquet file (a
`FileSink` under the state path) that the manifest names, exactly as for a file sink. Once the manifest
is published, the owning task calls `publish` (`Publisher`): in one Kafka transaction the sink produces
the rows of every committed-but-unpublished batch to the output topic plus a *marker* record to the
marker topic holding the manifest head (seq, input offset, epoch) it published through. So:

* outputs and the marker commit atomically: a marker never claims a batch whose records are not
  visible, and visible records always have their marker;
* `transactional.id` is per task (namespace, app, topic, partition; `transactional_id`): a new owner's
  `initTransactions` aborts whatever the old owner had open and fences its producer, whose next commit
  fails. Same-named apps of two namespaces have ids, marker keys and marker readers of their own, so
  neither fences the other nor takes the other's markers for its own;
* ids before namespaces (`legacy_transactional_id`) also meet ids of other apps and namespaces, so
  every new channel fences its task's old id once before starting its own: an executor upgraded in
  place aborts what its predecessor left open (read_committed readers would otherwise stand still for
  up to `transaction.timeout.ms`) and fences a predecessor still running. Once no executor of a version
  before this one runs, that step costs one `initTransactions` per channel and finds nothing;
* after its own `initTransactions` a publisher reads the last committed marker (nothing can commit
  under that id any more without fencing it), then walks the manifest history from there with the
  same rules as every reader (`manifest.advance`): refused zombie manifests are never published and
  accepted ones are published once, in order.

A fenced publisher raises `Conflict`: the task catches up, and if a higher epoch owns the partition it
stops (it was the zombie); if not, the next publish re-initialises and fences the other producer.
Staging files are deleted once their transaction committed; those a crash left between the commit and
the delete (or a losing attempt of a published sequence) are swept when the next producer of the
partition has read the marker that covers them.

`transactional=False` is the at-least-once mode for clusters without transactions (or readers that do
not use `read_committed`): outputs are flushed before the marker, so a crash between the two, or a
zombie still publishing, repeats batches; nothing is lost.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streamapp import faults
from streamapp.executor.io.kafkaclient import METADATA_TIMEOUT_S, KafkaEndpoint, ensure_topic, watermarks
from streamapp.executor.io.sink import FileSink
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.changelog import read_file
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Conflict, Head, Kind, Manifest

MAX_BATCHES_PER_TRANSACTION = 50
MARKER_WINDOW = 64
TRANSACTION_TIMEOUT_S = 60.0


def marker_topic(topic: str) -> str:
    """Where the markers of an output topic live (one record per published transaction)."""
    return f"{topic}.streamapp-markers"


def transactional_id(namespace: str, app: str, topic: str, partition: int) -> str:
    """The task's producer id: `/` appears in no namespace, app or topic name, so every id names one
    task of one app, and none is a legacy id (those have no `/`)."""
    return f"streamapp/{namespace}/{app}/{topic}/{partition}"


def legacy_transactional_id(app: str, topic: str, partition: int) -> str:
    """The id executors used before it named the namespace (fenced once per channel, see above)."""
    return f"streamapp.{app}.{topic}.{partition}"


def marker_key(namespace: str, app: str, partition: int) -> bytes:
    return f"{namespace}/{app}/{partition}".encode()


def legacy_marker_key(app: str, partition: int) -> bytes:
    """The marker key before it named the namespace: read when a partition has no marker of the new
    key yet, so an upgraded app resumes from what its predecessor published."""
    return f"{app}/{partition}".encode()


def encode_marker(head: Head) -> bytes:
    return json.dumps({"seq": head.seq, "offset": head.offset, "epoch": head.epoch}).encode()


def decode_marker(data: bytes) -> Head:
    body = json.loads(data)
    return Head(seq=int(body["seq"]), offset=int(body["offset"]), epoch=int(body["epoch"]))


def output_records(rows: pa.Table) -> list[tuple[bytes, bytes]]:
    """(key, value) of each output row; pure. Values are JSON (a number, or a quoted string)."""
    keys = rows.column("key").to_pylist()
    values = rows.column("value").to_pylist()
    return [(str(k).encode(), json.dumps(v).encode()) for k, v in zip(keys, values, strict=True)]


@dataclass
class _Channel:
    """One partition's producer, the owner epoch it serves and what is published so far."""

    producer: Producer
    epoch: int
    published: Head


class KafkaSink:
    """Stage outputs as files (the `Sink`), publish committed batches to Kafka (the `Publisher`)."""

    def __init__(
        self,
        endpoint: KafkaEndpoint,
        layout: StateLayout,
        app: str,
        partitions: int,
        transactional: bool = True,
        *,
        namespace: str,
    ) -> None:
        self.endpoint = endpoint
        self.layout = layout
        self.namespace = namespace
        self.app = app
        self.partitions = partitions
        self.transactional = transactional
        self.staging = FileSink(layout.store.child("kafka-staging"))
        self.markers = KafkaEndpoint(
            endpoint.bootstrap_servers, marker_topic(endpoint.topic), endpoint.properties
        )
        self._channels: dict[int, _Channel] = {}
        self._marker_topic_ready = False

    def write(self, partition: int, seq: int, epoch: int, rows: pa.Table) -> tuple[str, ...]:
        return self.staging.write(partition, seq, epoch, rows)

    def settle(self, partition: int, decided: Mapping[int, tuple[str, ...]]) -> None:
        self.staging.settle(partition, decided)

    def publish(self, partition: int, epoch: int, head: Head) -> int:
        channel = self._channel(partition, epoch)
        published = 0
        while channel.published.seq < head.seq:
            batches, through = self._pending(partition, channel.published, head.seq)
            self._send(channel, partition, batches, through)
            channel.published = through
            published += len(batches)
            for batch in batches:
                self._drop_staged(batch)
        return published

    def _channel(self, partition: int, epoch: int) -> _Channel:
        """The partition's producer for this owner epoch, created (and fencing older ones) when new."""
        channel = self._channels.get(partition)
        if channel is not None and channel.epoch == epoch:
            return channel
        if channel is not None:
            self._close(partition)
        if not self._marker_topic_ready:
            ensure_topic(self.markers, self.partitions, **{"cleanup.policy": "compact"})
            self._marker_topic_ready = True
        producer = Producer(self._producer_config(partition))
        try:
            if self.transactional:
                self._fence_legacy(partition)
                producer.init_transactions(TRANSACTION_TIMEOUT_S)
            published = self.last_marker(partition)
        except KafkaException as error:
            raise Conflict(f"partition {partition}: Kafka producer not ready: {error}") from error
        channel = _Channel(producer, epoch, published)
        self._channels[partition] = channel
        self._sweep_staged(partition, published.seq)
        return channel

    def _sweep_staged(self, partition: int, through: int) -> None:
        """Delete the staged files of sequences up to `through`: the marker says they are published,
        so none of them is ever read again."""
        folder = self.staging.directory(partition)
        for entry, final in self.staging.store.leftovers(folder):
            seq = final.split("-", 1)[0]
            if seq.isdigit() and int(seq) <= through:
                with contextlib.suppress(FileNotFoundError):
                    self.staging.store.delete(f"{folder}/{entry}")

    def _producer_config(self, partition: int, legacy: bool = False) -> dict[str, Any]:
        fixed: dict[str, Any] = {"enable.idempotence": True, "partitioner": "murmur2_random", "linger.ms": 5}
        if self.transactional:
            fixed["transactional.id"] = (
                legacy_transactional_id(self.app, self.endpoint.topic, partition)
                if legacy
                else transactional_id(self.namespace, self.app, self.endpoint.topic, partition)
            )
            fixed["transaction.timeout.ms"] = int(TRANSACTION_TIMEOUT_S * 1000)
        return self.endpoint.config(**fixed)

    def _fence_legacy(self, partition: int) -> None:
        """Abort what a producer of the task's legacy id left open and fence it (see the module)."""
        Producer(self._producer_config(partition, legacy=True)).init_transactions(TRANSACTION_TIMEOUT_S)

    def _pending(self, partition: int, published: Head, last: int) -> tuple[list[Manifest], Head]:
        """Accepted batch manifests after `published` (up to `last`, bounded) and the head after them."""
        head = published
        batches: list[Manifest] = []
        while head.seq < last and len(batches) < MAX_BATCHES_PER_TRANSACTION:
            found = manifests.read(self.layout, partition, head.next_seq)
            if found is None:
                raise RuntimeError(
                    f"partition {partition}: manifest {head.next_seq} missing below head {last}"
                )
            step = manifests.advance(head, found)
            head = step.head
            if step.accepted and found.kind is Kind.BATCH:
                batches.append(found)
        return batches, head

    def _send(self, channel: _Channel, partition: int, batches: list[Manifest], through: Head) -> None:
        """Produce the batches' rows and the marker: in one transaction, or (at-least-once) in order."""
        producer = channel.producer
        try:
            if self.transactional:
                producer.begin_transaction()
            for batch in batches:
                self._produce_batch(producer, partition, batch)
            if not self.transactional:
                self._flush(producer)
            producer.produce(
                self.markers.topic,
                key=marker_key(self.namespace, self.app, partition),
                value=encode_marker(through),
                partition=partition % self.partitions,
            )
            self._flush(producer)  # every record is at the broker, in the open transaction if any
            faults.reached("publish.produced")
            if self.transactional:
                producer.commit_transaction(TRANSACTION_TIMEOUT_S)
            faults.reached("publish.committed")
        except (KafkaException, FileNotFoundError) as error:
            self._close(partition)
            raise Conflict(
                f"partition {partition}: publishing through seq {through.seq} failed: {error}"
            ) from error

    def _produce_batch(self, producer: Producer, partition: int, batch: Manifest) -> None:
        headers: list[tuple[str, str | bytes | None]] = [
            ("streamapp.task", str(partition).encode()),
            ("streamapp.seq", str(batch.seq).encode()),
        ]
        for name in batch.outputs:
            for key, value in output_records(read_file(self.staging.store, name)):
                while True:
                    try:
                        producer.produce(self.endpoint.topic, key=key, value=value, headers=headers)
                        break
                    except BufferError:
                        producer.poll(0.1)  # the local queue is full: let deliveries drain it
            producer.poll(0)

    @staticmethod
    def _flush(producer: Producer) -> None:
        if producer.flush(TRANSACTION_TIMEOUT_S) > 0:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "records not delivered in time"))

    def _drop_staged(self, batch: Manifest) -> None:
        for name in batch.outputs:
            self.staging.store.delete(name)

    def _close(self, partition: int) -> None:
        channel = self._channels.pop(partition, None)
        if channel is not None:
            channel.producer.flush(0)

    def last_marker(self, partition: int) -> Head:
        """The head of the newest committed marker of this app's partition, `Head()` when none; the
        newest of its legacy key when it has none of the new key (an app published before the upgrade).

        Reads backwards from the partition's stable end in windows, so it costs one window when this
        app alone writes the marker partition.
        """
        consumer = Consumer(
            self.markers.config(
                **{
                    "group.id": f"streamapp-markers-{self.namespace}-{self.app}",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                }
            )
        )
        key = marker_key(self.namespace, self.app, partition)
        legacy = legacy_marker_key(self.app, partition)
        where = TopicPartition(self.markers.topic, partition % self.partitions)
        before: bytes | None = None
        try:
            low, end = watermarks(consumer, where)
            while end > low:
                start = max(low, end - MARKER_WINDOW)
                found = _last_values(consumer, where, start, end, (key, legacy))
                if key in found:
                    return decode_marker(found[key])
                before = before or found.get(legacy)
                end = start
            return decode_marker(before) if before is not None else Head()
        finally:
            consumer.close()


def _last_values(
    consumer: Consumer, where: TopicPartition, start: int, end: int, keys: tuple[bytes, ...]
) -> dict[bytes, bytes]:
    """The value of the last record of each of `keys` found in offsets `[start, end)` of one partition."""
    consumer.assign([TopicPartition(where.topic, where.partition, start)])
    found: dict[bytes, bytes] = {}
    while True:
        message = consumer.poll(METADATA_TIMEOUT_S)
        if message is None:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"reading markers of {where.topic}"))
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                break
            raise KafkaException(error)
        offset = message.offset() or 0
        if offset >= end:
            break
        key, value = message.key(), message.value()
        if key in keys and value is not None:
            found[key] = value
        if offset >= end - 1:
            break
    consumer.unassign()
    return found
