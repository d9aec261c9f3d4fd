"""Kafka transactional ids and markers name the namespace and the app, on the real broker: same-named
apps of two namespaces publishing to one topic neither fence each other nor take each other's markers,
and an executor upgraded from ids without the namespace aborts the transaction its predecessor left
open under the old id instead of leaving read_committed readers standing still behind it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import KafkaException, Producer

from kafkabroker import records
from localcluster.waiting import wait_for
from streamapp.executor.io.kafkaclient import KafkaEndpoint, ensure_topic
from streamapp.executor.io.kafkasink import KafkaSink, encode_marker, legacy_transactional_id
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head, Kind, Manifest

pytestmark = pytest.mark.kafka
PARTITIONS = 1
# How long a read waits for committed records, and (ten times longer) how long a transaction left open
# would hold readers back if nothing aborted it.
READ_TIMEOUT_S = 60.0
DANGLING_TIMEOUT_MS = int(READ_TIMEOUT_S * 10_000)


def commit(sink: KafkaSink, layout: StateLayout, seq: int, keys: list[str]) -> Head:
    """Commit batch `seq` of partition 0 (epoch 1) whose outputs are `keys`, as a task does: outputs
    staged, then the manifest; returns the head through it."""
    rows = pa.table({"key": keys, "value": pa.array([1] * len(keys), pa.int64())})
    outputs = sink.write(0, seq, 1, rows)
    start = 10 * seq
    batch = Manifest(seq=seq, epoch=1, kind=Kind.BATCH, start=start, end=start + 10, outputs=outputs)
    manifests.create(layout, 0, batch)
    return Head(seq=seq, offset=start + 10, epoch=1)


def committed_keys(bootstrap: str, topic: str, count: int) -> list[str]:
    """The keys a read_committed reader gets, once it gets `count`: a transaction's commit markers
    are written after `commit_transaction` returns, so its records become readable a moment later."""
    return wait_for(
        lambda: keys if len(keys := [r.key for r in records.read_all(bootstrap, topic)]) >= count else None,
        READ_TIMEOUT_S,
        f"{count} committed records in {topic}",
    )


def topic(bootstrap: str) -> KafkaEndpoint:
    endpoint = KafkaEndpoint(bootstrap, f"out-{uuid.uuid4().hex[:8]}")
    ensure_topic(endpoint, PARTITIONS)
    return endpoint


def test_same_named_apps_of_two_namespaces_publish_to_one_topic_side_by_side(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    out = topic(kafka_bootstrap)
    layouts = {ns: StateLayout(tmp_path / ns) for ns in ("team-a", "team-b")}
    sinks = {ns: KafkaSink(out, layout, "counts", PARTITIONS, namespace=ns) for ns, layout in layouts.items()}
    a, b = sinks["team-a"], sinks["team-b"]
    assert a.publish(0, 1, commit(a, layouts["team-a"], 0, ["a0"])) == 1
    # team-b's producer starts after team-a's: with one id for both it fenced team-a's, and it took
    # team-a's marker for its own (publishing nothing).
    assert b.publish(0, 1, commit(b, layouts["team-b"], 0, ["b0"])) == 1
    assert a.publish(0, 1, commit(a, layouts["team-a"], 1, ["a1"])) == 1
    assert b.publish(0, 1, commit(b, layouts["team-b"], 1, ["b1"])) == 1
    assert sorted(committed_keys(kafka_bootstrap, out.topic, 4)) == ["a0", "a1", "b0", "b1"]
    assert a.last_marker(0).seq == b.last_marker(0).seq == 1


def test_an_upgraded_executor_aborts_what_its_predecessor_left_open_under_the_old_id(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    out = topic(kafka_bootstrap)
    # The executor before the upgrade: inside a transaction under the id without the namespace when
    # its pod went away (a record sent, never committed).
    before = Producer(
        out.config(
            **{
                "transactional.id": legacy_transactional_id("counts", out.topic, 0),
                "transaction.timeout.ms": DANGLING_TIMEOUT_MS,
            }
        )
    )
    before.init_transactions(60)
    before.begin_transaction()
    before.produce(out.topic, key=b"left-open", value=b"1", partition=0)
    assert before.flush(60) == 0

    layout = StateLayout(tmp_path / "state")
    after = KafkaSink(out, layout, "counts", PARTITIONS, namespace="team-a")
    assert after.publish(0, 1, commit(after, layout, 0, ["after"])) == 1
    # Readers of committed records get past the aborted record (never seeing it) well before the
    # predecessor's transaction would have timed out.
    assert committed_keys(kafka_bootstrap, out.topic, 1) == ["after"]
    # The predecessor, had it still run, is fenced.
    with pytest.raises(KafkaException):
        before.commit_transaction(60)


def test_an_upgraded_executor_resumes_from_the_marker_its_predecessor_published(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Batch 0 was published before the upgrade, its marker under the key without the namespace:
    the upgraded sink publishes batch 1 only, not batch 0 again."""
    out = topic(kafka_bootstrap)
    layout = StateLayout(tmp_path / "state")
    after = KafkaSink(out, layout, "counts", PARTITIONS, namespace="team-a")
    commit(after, layout, 0, ["published-before"])
    ensure_topic(after.markers, PARTITIONS)
    before = Producer(out.config())
    before.produce(after.markers.topic, key=b"counts/0", value=encode_marker(Head(0, 10, 1)), partition=0)
    assert before.flush(60) == 0
    assert after.publish(0, 1, commit(after, layout, 1, ["published-after"])) == 1
    assert committed_keys(kafka_bootstrap, out.topic, 1) == ["published-after"]
