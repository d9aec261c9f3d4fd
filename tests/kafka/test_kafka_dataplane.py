"""The data plane on a real Kafka broker: explicit-offset reads, and exactly-once publishing to a topic
across a crash between commit and publish, a handoff, and a fenced zombie producer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession

from kafkabroker import checks, records
from streamapp import faults
from streamapp.api.names import consumer_group
from streamapp.executor import pipeline as pipelines
from streamapp.executor.io.generate import make_records
from streamapp.executor.io.kafkaclient import KafkaEndpoint, PartitionMismatch, check_partitions, ensure_topic
from streamapp.executor.io.kafkasink import KafkaSink
from streamapp.executor.io.kafkasource import KafkaSource
from streamapp.executor.io.sink import FileSink, Sink
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Conflict
from streamapp.executor.task import TaskConfig

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
COUNTS = "streamapp.executor.samples.counts:counts"
PARTITIONS = 2


def topics(bootstrap: str) -> tuple[KafkaEndpoint, KafkaEndpoint]:
    suffix = uuid.uuid4().hex[:8]
    source, sink = KafkaEndpoint(bootstrap, f"in-{suffix}"), KafkaEndpoint(bootstrap, f"out-{suffix}")
    ensure_topic(source, PARTITIONS)
    ensure_topic(sink, PARTITIONS)
    return source, sink


def inputs(seed: int, count: int) -> dict[int, list[str]]:
    """Each partition's keys in offset order, as `records.produce` sends them."""
    keys, _ = make_records(seed, 0, count, 50)
    split: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for key in keys:
        split[zlib.crc32(key.encode()) % PARTITIONS].append(key)
    return split


def executor(root: Path, source: KafkaSource, sink: Sink, owner: str) -> Executor:
    config = TaskConfig(owner=owner, max_batch_records=700)
    return Executor(StateLayout(root / "state"), source, sink, pipelines.load(COUNTS), config)


def test_reads_exactly_the_offsets_asked_and_checks_partitions(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    source_topic, _ = topics(kafka_bootstrap)
    records.produce(kafka_bootstrap, source_topic.topic, PARTITIONS, seed=1, start=0, count=2_000, keys=50)
    expected = inputs(1, 2_000)
    source = KafkaSource(source_topic)
    assert [source.end_offset(p) for p in range(PARTITIONS)] == [len(expected[p]) for p in range(PARTITIONS)]
    frame = source.read(spark, 1, 10, 110).toArrow()
    assert frame.column("offset").to_pylist() == list(range(10, 110))
    assert frame.column("key").to_pylist() == expected[1][10:110]
    assert source.read(spark, 0, 5, 5).count() == 0
    # Keys read ahead (`Task.read_ahead`) fetch the span once; the read that follows gets those records,
    # and a read of another span is fetched anew.
    assert sorted(source.keys_in_process(1, 10, 110)) == sorted(set(expected[1][10:110]))
    assert source.read_in_process(1, 10, 110).column("key").to_pylist() == expected[1][10:110]
    source.keys_in_process(1, 0, 50)
    assert source.read_in_process(1, 20, 30).column("offset").to_pylist() == list(range(20, 30))
    check_partitions(source_topic, PARTITIONS)
    with pytest.raises(PartitionMismatch, match=r"has 2 partitions but spec\.partitions is 3"):
        check_partitions(source_topic, 3)
    source.close()


def test_committed_positions_reach_the_apps_consumer_group(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Kafka's lag tools see the app: each owner's committed position is committed to its group."""
    source_topic, _ = topics(kafka_bootstrap)
    records.produce(kafka_bootstrap, source_topic.topic, PARTITIONS, seed=3, start=0, count=2_000, keys=50)
    group = consumer_group("tests", f"app-{uuid.uuid4().hex[:6]}")
    source = KafkaSource(source_topic, group=group)
    owner = executor(tmp_path, source, FileSink(tmp_path / "out"), "owner")
    owner.apply(Target(active={0: 1, 1: 1}))
    owner.run_until_idle()
    heads = {p: owner.tasks[p].head.offset for p in range(PARTITIONS)}
    assert heads == {p: source.end_offset(p) for p in range(PARTITIONS)}
    source.close()
    monitor = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        wanted = [TopicPartition(source_topic.topic, p) for p in range(PARTITIONS)]
        deadline = time.monotonic() + 30
        while True:  # the commits are asynchronous
            found = {tp.partition: tp.offset for tp in monitor.committed(wanted, timeout=10)}
            if found == heads or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert found == heads, "the group's committed offsets are the owners' committed positions"
    finally:
        monitor.close()


def test_committed_batches_reach_the_topic_exactly_once(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    source_topic, sink_topic = topics(kafka_bootstrap)
    records.produce(kafka_bootstrap, source_topic.topic, PARTITIONS, seed=7, start=0, count=3_000, keys=50)
    source = KafkaSource(source_topic)
    layout = StateLayout(tmp_path / "state")

    def kafka_sink() -> KafkaSink:
        return KafkaSink(sink_topic, layout, "app", PARTITIONS, namespace="ns")

    # Epoch 1 commits batches whose outputs are staged but never published (as if killed right
    # after each manifest): the staging sink alone, without the publishing step.
    crashed = executor(tmp_path, source, FileSink(layout.store.child("kafka-staging")), "crashed")
    crashed.apply(Target(active={0: 1, 1: 1}))
    crashed.step()
    crashed.step()

    # Epoch 2 takes over: it publishes its predecessor's committed batches, then its own.
    second_sink = kafka_sink()
    second = executor(tmp_path, source, second_sink, "second")
    second.apply(Target(active={0: 2, 1: 2}))
    second.run_until_idle()

    # Epoch 3 takes over partition 0 (a handoff); its producer fences epoch 2's.
    records.produce(
        kafka_bootstrap, source_topic.topic, PARTITIONS, seed=7, start=3_000, count=2_000, keys=50
    )
    third = executor(tmp_path, source, kafka_sink(), "third")
    third.apply(Target(active={0: 3}))
    expected = inputs(7, 5_000)
    # Input lag comes from the broker: its end offset minus the committed offset.
    assert third.status()[0].input_lag == len(expected[0]) - second.status()[0].committed_offset > 0
    third.step()  # takes over: fences the history
    third.step()  # its first batch: initTransactions fences epoch 2's producer, then it publishes
    # The zombie (epoch 2's producer, still holding batches it believes unpublished) publishes nothing.
    with pytest.raises(Conflict, match="publishing"):
        second_sink.publish(0, 2, third.tasks[0].head)
    second.run_until_idle()
    assert second.status()[0].fenced_by == 3
    third.run_until_idle()
    for status in third.status():
        assert status.committed_offset == len(expected[status.partition])
    assert second.status()[1].committed_offset == len(expected[1])
    published = records.read_all(kafka_bootstrap, sink_topic.topic)
    assert checks.differences(layout, expected, published) == []
    assert len(published) > 0

    # A crash between a transaction's commit and the deletion of its staged files leaves them behind;
    # the next producer of the partition sweeps them once it has read the marker that covers them.
    staging = layout.store.child("kafka-staging")
    staging.put("p=0/000000000001-e2-leftover0000.parquet", b"published, then the owner died")
    records.produce(kafka_bootstrap, source_topic.topic, PARTITIONS, seed=7, start=5_000, count=500, keys=50)
    fourth = executor(tmp_path, source, kafka_sink(), "fourth")
    fourth.apply(Target(active={0: 4, 1: 4}))
    fourth.run_until_idle()
    assert staging.names("p=0") == []
    published = records.read_all(kafka_bootstrap, sink_topic.topic)
    assert checks.differences(layout, inputs(7, 5_500), published) == []
    source.close()


def test_the_at_least_once_mode_publishes_every_committed_batch_without_transactions(
    spark: SparkSession, kafka_bootstrap: str, tmp_path: Path
) -> None:
    source_topic, sink_topic = topics(kafka_bootstrap)
    records.produce(kafka_bootstrap, source_topic.topic, PARTITIONS, seed=5, start=0, count=2_000, keys=50)
    source = KafkaSource(source_topic)
    layout = StateLayout(tmp_path / "state")
    plain = KafkaSink(sink_topic, layout, "app", PARTITIONS, transactional=False, namespace="ns")
    first = executor(tmp_path, source, plain, "first")
    first.apply(Target(active={0: 1, 1: 1}))
    first.run_until_idle()
    # A restarted owner resumes from the marker: nothing is published twice when nothing crashed.
    second = executor(
        tmp_path,
        source,
        KafkaSink(sink_topic, layout, "app", PARTITIONS, transactional=False, namespace="ns"),
        "2nd",
    )
    second.apply(Target(active={0: 2, 1: 2}))
    records.produce(
        kafka_bootstrap, source_topic.topic, PARTITIONS, seed=5, start=2_000, count=1_000, keys=50
    )
    second.run_until_idle()
    published = records.read_all(kafka_bootstrap, sink_topic.topic)
    assert checks.differences(layout, inputs(5, 3_000), published) == []
    source.close()


def test_kills_in_the_publish_window_keep_the_topic_exactly_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Three owners in turn are SIGKILLed: after a batch's manifest and before its transaction
    (`batch.committed`), inside the transaction with every record at the broker (`publish.produced`),
    and after the commit before the staged files are deleted (`publish.committed`). Each next owner
    publishes what was committed and not yet published; a `read_committed` reader sees each batch once."""
    source_topic, sink_topic = topics(kafka_bootstrap)

    def run(epoch: int, crash: str | None) -> int:
        env = {k: v for k, v in os.environ.items() if k != faults.ENV}
        if crash is not None:
            # the fourth time: past the first publishes (each owner first publishes its fence alone)
            env[faults.ENV] = f"{crash}:4"
        args = [str(tmp_path), kafka_bootstrap, source_topic.topic, sink_topic.topic, str(PARTITIONS)]
        runner = [sys.executable, str(Path(__file__).with_name("publish_runner.py"))]
        done = subprocess.run(
            [*runner, *args, str(epoch), f"owner-{epoch}"], env=env, capture_output=True, timeout=300
        )
        assert done.returncode in (0, -signal.SIGKILL), done.stderr.decode()[-3000:]
        return done.returncode

    produced = 0
    for epoch, point in enumerate(("batch.committed", "publish.produced", "publish.committed"), start=1):
        records.produce(
            kafka_bootstrap, source_topic.topic, PARTITIONS, seed=9, start=produced, count=1_500, keys=50
        )
        produced += 1_500
        assert run(epoch, point) == -signal.SIGKILL, point
        if point == "publish.produced":
            aborted = records.read_all(kafka_bootstrap, sink_topic.topic, committed=False)
            committed = records.read_all(kafka_bootstrap, sink_topic.topic)
            assert len(aborted) > len(committed), "killed mid-transaction"
    assert run(4, None) == 0
    layout = StateLayout(tmp_path / "state")
    published = records.read_all(kafka_bootstrap, sink_topic.topic)
    assert checks.differences(layout, inputs(9, produced), published) == []


def produce_to(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(count):
        producer.produce(topic, key=f"k{n % 7}", value=f"v{n}", partition=partition)
    assert producer.flush(30) == 0


def test_a_read_waiting_on_one_partition_does_not_hold_up_another(kafka_bootstrap: str) -> None:
    """The partitions of a round are read side by side, each read on a consumer of its own: a read of
    offsets not yet in the topic goes on waiting while another partition's read completes."""
    source_topic, _ = topics(kafka_bootstrap)
    produce_to(kafka_bootstrap, source_topic.topic, 0, 100)
    produce_to(kafka_bootstrap, source_topic.topic, 1, 100)
    source = KafkaSource(source_topic)
    got: dict[int, pa.Table] = {}
    waiting = threading.Thread(target=lambda: got.update({0: source.read_arrow(0, 0, 150)}), daemon=True)
    waiting.start()
    try:
        deadline = time.monotonic() + 30
        while not (source._all and not source._idle) and time.monotonic() < deadline:
            time.sleep(0.01)  # until partition 0's read holds its consumer
        got[1] = source.read_arrow(1, 0, 100)
        assert waiting.is_alive(), "partition 0's read still waits for offsets 100-149"
        produce_to(kafka_bootstrap, source_topic.topic, 0, 50)
        waiting.join(60)
        assert got[0].column("offset").to_pylist() == list(range(150))
        assert got[1].column("offset").to_pylist() == list(range(100))
    finally:
        source.close()
