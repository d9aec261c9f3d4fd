"""`streamapp generate --kafka`, the Kafka sample's feed, on a real broker: it creates the topics it is
told to, writes the seeded stream split by key, continues where the topic ends when started again, and
refuses a topic whose partition count is not the app's."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from kafkabroker import records
from streamapp.executor.io.generate import make_records, partition_of
from streamapp.executor.io.kafkaclient import KafkaEndpoint, ensure_topic, partition_count

pytestmark = pytest.mark.kafka
PARTITIONS = 3
KEYS = 40
SEED = 5


def feed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamapp.cli", "generate", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def stream(count: int) -> dict[int, list[tuple[str, str]]]:
    """Records 0 .. count-1 of the seeded stream, per partition in order."""
    split: dict[int, list[tuple[str, str]]] = {p: [] for p in range(PARTITIONS)}
    for key, value in zip(*make_records(SEED, 0, count, KEYS), strict=True):
        split[partition_of(key, PARTITIONS)].append((key, value))
    return split


def held(bootstrap: str, topic: str) -> dict[int, list[tuple[str, str]]]:
    split: dict[int, list[tuple[str, str]]] = {p: [] for p in range(PARTITIONS)}
    for record in records.read_all(bootstrap, topic, committed=False):
        split[record.partition].append((record.key, record.value))
    return split


def test_the_feed_creates_its_topics_and_continues_the_stream_where_the_topic_ends(
    kafka_bootstrap: str,
) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, sink = f"clicks-{suffix}", f"counts-{suffix}"
    common = ["--kafka", kafka_bootstrap, "--topic", source, "--partitions", str(PARTITIONS)]
    common += ["--keys", str(KEYS), "--seed", str(SEED)]
    first = feed(*common, "--create-topic", sink, "--count", "500")
    assert first.returncode == 0, first.stderr
    assert "from record 0" in first.stdout
    for topic in (source, sink):
        assert partition_count(KafkaEndpoint(kafka_bootstrap, topic)) == PARTITIONS
    assert held(kafka_bootstrap, source) == stream(500)

    again = feed(*common, "--create-topic", sink, "--count", "200", "--rate", "400", "--interval", "0.1")
    assert again.returncode == 0, again.stderr
    assert "from record 500" in again.stdout
    assert held(kafka_bootstrap, source) == stream(700)


def test_a_topic_with_another_partition_count_is_refused_with_both_counts(kafka_bootstrap: str) -> None:
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    ensure_topic(KafkaEndpoint(kafka_bootstrap, topic), PARTITIONS + 1)
    found = feed(
        "--kafka", kafka_bootstrap, "--topic", topic, "--partitions", str(PARTITIONS), "--count", "10"
    )
    assert found.returncode != 0
    assert f"has {PARTITIONS + 1} partitions but spec.partitions is {PARTITIONS}" in found.stderr
    assert records.read_all(kafka_bootstrap, topic, committed=False) == []


def test_topic_options_without_kafka_are_refused() -> None:
    found = feed("--log", "/nonexistent", "--topic", "clicks", "--partitions", "1", "--count", "1")
    assert found.returncode == 2
    assert "go with --kafka" in found.stderr
