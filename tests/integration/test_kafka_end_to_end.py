"""A StreamApp reading a Kafka topic and publishing to one, on the real control plane and a real broker.

The source topic starts with one partition too few: the app must say so in its Degraded condition, and
recover once the topic has its partitions. Then real executors (PySpark processes in member pods on the process node) read input that a producer
keeps appending, while the app is scaled out, a member's executor is SIGKILLed, a member pod is
deleted (bounced) and the app is scaled in. Afterwards the output topic, read with `read_committed`,
must hold exactly the committed batches of every task — each once, with the running counts a
reference computes from the input — and every input record must be committed: 0 lost, 0 duplicated.
"""

from __future__ import annotations

import random
import threading
import uuid
import zlib
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from kubernetes import client
from operator_support import APP, Operators, app, scale

from chaos.faults import kill_executor
from kafkabroker import checks, records
from localcluster.controlplane import LocalCluster
from localcluster.waiting import wait_for
from realapps import app_on_process_node
from streamapp.api.names import APPS, GROUP, VERSION, consumer_group
from streamapp.executor.io.generate import make_records
from streamapp.executor.io.kafkaclient import KafkaEndpoint, ensure_topic
from streamapp.executor.io.kafkasource import KafkaSource
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout

PARTITIONS = 4
KEYS = 60
SEED = 13
CHUNK = 300
CHUNK_PAUSE_S = 0.5


class Input:
    """Produces the seeded stream in chunks until stopped; `produced` is how many records were sent."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.produced = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kafka-input", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(CHUNK_PAUSE_S):
            records.produce(self.bootstrap, self.topic, PARTITIONS, SEED, self.produced, CHUNK, KEYS)
            self.produced += CHUNK

    def finish(self) -> dict[int, list[str]]:
        """Stop producing; each partition's keys in offset order."""
        self.stop.set()
        self.thread.join()
        keys, _ = make_records(SEED, 0, self.produced, KEYS)
        split: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        for key in keys:
            split[zlib.crc32(key.encode()) % PARTITIONS].append(key)
        return split


def kafka_app(root: Path, bootstrap: str, source: str, sink: str, replicas: int) -> dict[str, Any]:
    body = app_on_process_node(APP, root, PARTITIONS, replicas=replicas, maxWarmupReplicas=PARTITIONS)
    pipeline = body["spec"]["pipeline"]
    pipeline["source"] = {"type": "kafka", "kafka": {"bootstrapServers": bootstrap, "topic": source}}
    pipeline["sink"] = {"type": "kafka", "kafka": {"bootstrapServers": bootstrap, "topic": sink}}
    return body


def committed_through(state: StateLayout, source: KafkaSource, ends: dict[int, int] | None = None) -> bool:
    """Every task's accepted batches reach its partition's end offset (given, or the broker's now)."""
    for partition in range(PARTITIONS):
        history = [m.end for m in accepted_manifests(state, partition)]
        end = ends[partition] if ends is not None else source.end_offset(partition)
        if not history or history[-1] != end:
            return False
    return True


def active_members(api: client.ApiClient, namespace: str) -> dict[int, int]:
    status = app(api, namespace).get("status") or {}
    return {m["id"]: m["active"] for m in status.get("members") or []}


def degraded(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    conditions = (app(api, namespace).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Degraded"), {})


def test_a_kafka_app_publishes_exactly_once_through_a_partition_mismatch_scaling_kills_and_bounces(
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    process_node: str,
    local_cluster: LocalCluster | None,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    assert local_cluster is not None  # the process node runs on the local control plane only
    suffix = uuid.uuid4().hex[:8]
    source_topic, sink_topic = f"clicks-{suffix}", f"counts-{suffix}"
    ensure_topic(KafkaEndpoint(kafka_bootstrap, sink_topic), PARTITIONS)
    ensure_topic(KafkaEndpoint(kafka_bootstrap, source_topic), PARTITIONS - 1)  # one too few, at first
    state = StateLayout(tmp_path / "state")
    operators.start()
    body = kafka_app(tmp_path, kafka_bootstrap, source_topic, sink_topic, replicas=1)
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    core = client.CoreV1Api(api_client)

    # The executor cannot start on a topic with another partition count: the app says why.
    wait_for(
        lambda: degraded(api_client, namespace).get("reason") == "ExecutorSetupFailed",
        120,
        "Degraded=ExecutorSetupFailed for the partition mismatch",
    )
    condition = degraded(api_client, namespace)
    assert condition["status"] == "True"
    assert f"has {PARTITIONS - 1} partitions but spec.partitions is {PARTITIONS}" in condition["message"]
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_partitions([NewPartitions(source_topic, PARTITIONS)])[source_topic].result()

    source = KafkaSource(KafkaEndpoint(kafka_bootstrap, source_topic))
    feed = Input(kafka_bootstrap, source_topic)
    feed.thread.start()
    try:
        # Fixed: the restarted executor starts, and its first report clears the error.
        wait_for(
            lambda: all(list(accepted_manifests(state, p)) for p in range(PARTITIONS)), 240, "first commits"
        )
        wait_for(
            lambda: degraded(api_client, namespace).get("reason") != "ExecutorSetupFailed",
            60,
            "the setup error cleared",
        )

        scale(api_client, namespace, 2)
        wait_for(lambda: active_members(api_client, namespace) == {0: 2, 1: 2}, 240, "scaled out to two")

        killed = kill_executor(api_client, namespace, APP, local_cluster, random.Random(SEED))
        assert killed.startswith("SIGKILLed"), killed
        old_uid = core.read_namespaced_pod(f"{APP}-0", namespace).metadata.uid
        core.delete_namespaced_pod(f"{APP}-0", namespace, grace_period_seconds=0)

        def bounced() -> bool:
            pods = core.list_namespaced_pod(namespace, field_selector=f"metadata.name={APP}-0").items
            return (
                bool(pods)
                and pods[0].metadata.uid != old_uid
                and active_members(api_client, namespace)
                == {
                    0: 2,
                    1: 2,
                }
            )

        wait_for(bounced, 240, "member 0 bounced and both members active again")
        scale(api_client, namespace, 1)
        wait_for(lambda: active_members(api_client, namespace) == {0: 4}, 240, "scaled in to one")
    finally:
        inputs = feed.finish()
    ends = {p: source.end_offset(p) for p in range(PARTITIONS)}
    assert ends == {p: len(keys) for p, keys in inputs.items()}
    wait_for(lambda: committed_through(state, source, ends), 240, "all input committed")

    def exactly_once() -> str | None:
        """None while the output differs from the reference; the differences are the last value seen."""
        problems = checks.differences(state, inputs, records.read_all(kafka_bootstrap, sink_topic))
        return "exactly once" if not problems else None

    try:
        wait_for(exactly_once, 120, "every committed batch published exactly once")
    finally:
        source.close()
    assert checks.differences(state, inputs, records.read_all(kafka_bootstrap, sink_topic)) == []
    epochs = {p: {m.epoch for m in accepted_manifests(state, p)} for p in range(PARTITIONS)}
    assert any(len(seen) > 1 for seen in epochs.values()), f"no task changed owner: {epochs}"
    group = consumer_group(namespace, APP)
    wait_for(lambda: group_offsets(kafka_bootstrap, group, source_topic) == ends, 60, f"{group} at the ends")


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """What Kafka's lag tools read: the offsets committed to `group` for each partition of `topic`."""
    monitor = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = monitor.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        monitor.close()
