"""Who a member is and what it runs, read once from the environment the operator gives its pod.

Every value is checked here, before Spark starts: a setting that cannot work (a missing variable, a
Kafka endpoint without a topic, a state store another app owns) becomes a `SetupError` the member
reports in its status (`setupError`), so the app's Degraded condition names it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from streamapp.api.names import SPARK_EXECUTORS_ENV, consumer_group
from streamapp.api.streamapp import (
    DEFAULT_DELTA_RETENTION,
    DEFAULT_DELTA_RETENTION_SIZE,
    DEFAULT_LOCAL_STORE,
    LocalStoreKind,
    SparkExecutors,
)
from streamapp.executor import sparkk8s
from streamapp.executor.io.kafkaclient import (
    KafkaEndpoint,
    PartitionMismatch,
    check_partitions,
    endpoint_from_spec,
)
from streamapp.executor.io.kafkasink import KafkaSink
from streamapp.executor.io.kafkasource import KafkaSource
from streamapp.executor.io.sink import FileSink, Sink
from streamapp.executor.io.source import FileLog, Source
from streamapp.executor.spark import SparkSettings
from streamapp.executor.state import blobstore, owner
from streamapp.executor.state.blobstore import BlobStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import STORE_KINDS
from streamapp.executor.state.retention import Retention, retention_of
from streamapp.executor.task import DEFAULT_RETENTION
from streamapp.units import parse_duration


class SetupError(ValueError):
    """The pod's environment does not describe a runnable member."""


@dataclass(frozen=True)
class PodSettings:
    """Who this member is and what it runs, as the operator's pod manifest states it."""

    app: str
    namespace: str
    member: int
    pod_name: str
    pod_uid: str
    transform: str
    merge: str | None
    lateness: float | None
    log_path: Path | None
    sink_path: Path | None
    state_uri: str
    local_path: Path | None
    local_store: LocalStoreKind
    spark: SparkSettings
    partitions: int = 0
    # Where the executors' pod template goes when Spark runs on the cluster (`sparkk8s`), else None.
    spark_template: Path | None = None
    kafka_source: KafkaEndpoint | None = None
    kafka_sink: KafkaEndpoint | None = None
    exactly_once: bool = True
    drain_seconds: float = 0.0
    retention: Retention = DEFAULT_RETENTION

    @staticmethod
    def from_env(env: Mapping[str, str]) -> PodSettings:
        """Read the STREAMAPP_* variables; every error names the variable and what it lacks."""
        pipeline = env_object(env, "STREAMAPP_PIPELINE")
        conf = {str(k): str(v) for k, v in env_object(env, "STREAMAPP_SPARK_CONF").items()}
        source = pipeline.get("source") or {}
        kafka_source = _kafka(source, env, "source")
        if kafka_source is None and (source.get("type", "file") != "file" or not source.get("path")):
            raise SetupError("STREAMAPP_PIPELINE: the source must be a file source with a path or kafka")
        state_uri = str((pipeline.get("stateStore") or {}).get("uri", ""))
        store = urlparse(state_uri)
        if not (store.scheme == "s3" and store.netloc) and not (store.scheme in ("", "file") and store.path):
            raise SetupError(
                "STREAMAPP_PIPELINE: stateStore.uri must be s3://bucket/prefix or a file:// path"
            )
        sink_spec = pipeline.get("sink") or {}
        kafka_sink = _kafka(sink_spec, env, "sink")
        sink = sink_spec.get("path")
        local_store = pipeline.get("localStore", DEFAULT_LOCAL_STORE)
        if local_store not in STORE_KINDS:
            raise SetupError(f"STREAMAPP_PIPELINE: localStore must be one of {', '.join(STORE_KINDS)}")
        local = env.get("STREAMAPP_STATE_DIR")
        state_spec = pipeline.get("stateStore") or {}
        try:
            retention = retention_of(
                str(state_spec.get("deltaRetention", DEFAULT_DELTA_RETENTION)),
                str(state_spec.get("deltaRetentionSize", DEFAULT_DELTA_RETENTION_SIZE)),
            )
        except ValueError as error:
            raise SetupError(f"STREAMAPP_PIPELINE: stateStore.{error}") from None
        spark, template = _spark(env, conf)
        return PodSettings(
            app=_required(env, "STREAMAPP_APP"),
            namespace=_required(env, "STREAMAPP_NAMESPACE"),
            member=int(_required(env, "STREAMAPP_MEMBER_ID")),
            pod_name=env.get("STREAMAPP_POD_NAME", ""),
            pod_uid=_required(env, "STREAMAPP_POD_UID"),
            transform=str(pipeline.get("transform") or ""),
            merge=pipeline.get("merge"),
            lateness=(
                parse_duration(pipeline["allowedLateness"], "allowedLateness")
                if pipeline.get("allowedLateness")
                else None
            ),
            log_path=Path(source["path"]) if kafka_source is None else None,
            sink_path=Path(sink) if sink else None,
            state_uri=state_uri,
            local_path=Path(local) if local else None,
            local_store=local_store,
            spark=spark,
            spark_template=template,
            partitions=int(env.get("STREAMAPP_PARTITIONS") or 0),
            kafka_source=kafka_source,
            kafka_sink=kafka_sink,
            exactly_once=bool((sink_spec.get("kafka") or {}).get("exactlyOnce", True)),
            drain_seconds=float(env.get("STREAMAPP_DRAIN_SECONDS") or 0),
            retention=retention,
        )

    def source(self) -> Source:
        """The input: a Kafka topic whose partition count must equal the app's, or the file log."""
        if self.kafka_source is None:
            if self.log_path is None:
                raise SetupError("STREAMAPP_PIPELINE: the source has neither a path nor kafka")
            return FileLog(self.log_path)
        try:
            check_partitions(self.kafka_source, self.partitions)
        except PartitionMismatch as error:
            raise SetupError(str(error)) from error
        return KafkaSource(self.kafka_source, group=consumer_group(self.namespace, self.app))

    def state(self, *, check: bool = False) -> BlobStore:
        """The shared state store the pipeline names; `check` (once, as the executor starts) refuses an
        S3 server that ignores conditional writes and a root another app owns (`owner.claim`), and
        claims an unclaimed one for this app."""
        store = blobstore.open_uri(self.state_uri, check=check)
        if check:
            owner.claim(store, self.namespace, self.app)
        return store

    def sink(self) -> Sink:
        """Where outputs go: a Kafka topic (published after each commit), or Parquet files."""
        if self.kafka_sink is None:
            return FileSink(self.sink_path or self.state().child("outputs"))
        layout = StateLayout(self.state())
        return KafkaSink(
            self.kafka_sink,
            layout,
            self.app,
            self.partitions,
            transactional=self.exactly_once,
            namespace=self.namespace,
        )


def _spark(env: Mapping[str, str], conf: dict[str, str]) -> tuple[SparkSettings, Path | None]:
    """Spark in the pod (`spark.master` from sparkConf, local by default), or on the cluster when the
    operator passed `spec.executor.sparkExecutors` (then with the path of its executors' pod template)."""
    raw = env.get(SPARK_EXECUTORS_ENV)
    if not raw:
        return SparkSettings(master=conf.pop("spark.master", "local[*]"), conf=conf), None
    try:
        executors = SparkExecutors.from_dict(
            env_object(env, SPARK_EXECUTORS_ENV), "spec.executor.sparkExecutors"
        )
        template = sparkk8s.template_path(env)
        return sparkk8s.driver_settings(executors, conf, env, template), template
    except ValueError as error:  # the model's ValidationError, or a variable the pod lacks
        raise SetupError(f"{SPARK_EXECUTORS_ENV}: {error}") from None


def _kafka(endpoint: Mapping[str, Any], env: Mapping[str, str], role: str) -> KafkaEndpoint | None:
    """The Kafka endpoint of a `kafka` source or sink, None for other types."""
    if endpoint.get("type") != "kafka":
        return None
    spec = endpoint.get("kafka")
    if not isinstance(spec, dict) or not spec.get("bootstrapServers") or not spec.get("topic"):
        raise SetupError(f"STREAMAPP_PIPELINE: the kafka {role} needs kafka.bootstrapServers and kafka.topic")
    return endpoint_from_spec(spec, env, role)


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise SetupError(f"{name} is not set (the operator sets it in the member pod)")
    return value


def env_object(env: Mapping[str, str], name: str) -> dict[str, Any]:
    try:
        value = json.loads(env.get(name) or "{}")
    except json.JSONDecodeError as error:
        raise SetupError(f"{name} is not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise SetupError(f"{name} must be a JSON object")
    return value
