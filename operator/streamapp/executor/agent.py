"""`streamapp executor --from-cluster`: the process in every member pod.

It joins the two halves of an executor: the membership client (follow the StreamAppMember's target,
acknowledge, report) and the PySpark runtime (process, warm up, stand by, hand over). Identity and
pipeline come from the environment the operator gives the pod. Spark starts before the pod reports
ready, so a member never looks alive while it cannot yet process; readiness also lapses while the
membership client cannot hear its target (the API server out of reach for longer than a bound), and
returns, with no restart, once it can. On SIGTERM (pod deletion) a member the operator marked
`retiring` first finishes handing its tasks over, within `STREAMAPP_DRAIN_SECONDS` (`executor.drain`);
then every task finishes its batch and commits before the process exits. If processing fails, the
process exits non-zero and the kubelet restarts it (committed work is never lost: only manifested
batches count).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlparse

from kubernetes import client, config
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from streamapp.api.member import BATCH_NOTICE_SECONDS, StreamAppMemberSpec, TaskReport, TaskRole
from streamapp.api.names import SPARK_EXECUTORS_ENV, consumer_group
from streamapp.api.streamapp import (
    DEFAULT_DELTA_RETENTION,
    DEFAULT_DELTA_RETENTION_SIZE,
    LocalStoreKind,
    SparkExecutors,
)
from streamapp.executor import drain, sparkk8s
from streamapp.executor import pipeline as pipelines
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
from streamapp.executor.membership import ClientSettings, MembershipClient, report_setup_error
from streamapp.executor.runtime import LOG_FORMAT, Executor, Target
from streamapp.executor.spark import SparkSettings, session
from streamapp.executor.state import blobstore, owner
from streamapp.executor.state.blobstore import BlobStore
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import STORE_KINDS, LocalState, LocalStateError
from streamapp.executor.state.retention import Retention, retention_of
from streamapp.executor.task import Role, TaskConfig, TaskStatus
from streamapp.processmetrics import register_process_metrics
from streamapp.units import parse_duration

log = logging.getLogger("streamapp.executor")
IDLE_SECONDS = 0.2
SETUP_MESSAGE_CHARS = 600
# How the runtime's roles are spelled in a member's status (a revoked task is released at once).
REPORTED_ROLES: dict[Role, TaskRole] = {Role.ACTIVE: "active", Role.STANDBY: "standby", Role.WARMUP: "warmup"}


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
    retention: Retention = field(default_factory=Retention)

    @staticmethod
    def from_env(env: Mapping[str, str]) -> PodSettings:
        """Read the STREAMAPP_* variables; every error names the variable and what it lacks."""
        pipeline = _json(env, "STREAMAPP_PIPELINE")
        conf = {str(k): str(v) for k, v in _json(env, "STREAMAPP_SPARK_CONF").items()}
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
        local_store = pipeline.get("localStore", "memory")
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


class RuntimeDataPlane:
    """The PySpark runtime behind the membership client's `DataPlane` protocol, with metrics."""

    def __init__(self, executor: Executor, registry: CollectorRegistry) -> None:
        self.executor = executor
        register_process_metrics(registry)
        self.lag = Gauge(
            "streamapp_executor_task_lag",
            "Records a copy still has to apply",
            ["task", "role"],
            registry=registry,
        )
        self.offset = Gauge(
            "streamapp_executor_applied_offset",
            "Input offset applied; its rate() is records processed (active) or restored (copies) per second",
            ["task", "role"],
            registry=registry,
        )
        self.restored = Gauge(
            "streamapp_executor_restored_rows",
            "Rows restored from the shared store since the task came to this member: blocking (while "
            "active, before it could process) or background (as a standby or warmup)",
            ["task", "mode"],
            registry=registry,
        )
        self.full_restores = Counter(
            "streamapp_executor_full_restores",
            "Restores in full by a copy that had local state of its task (never silent): "
            "checkpoint-unusable, history-changed or delta-expired",
            ["reason"],
            registry=registry,
        )
        self.full_restore_totals = Totals(self.full_restores, "reason")
        self.committed_records = Counter(
            "streamapp_executor_committed_records",
            "Input records the active task committed on this executor",
            ["task"],
            registry=registry,
        )
        self.committed_totals = Totals(self.committed_records, "task")
        self.last_commit = Gauge(
            "streamapp_executor_last_commit_timestamp_seconds",
            "When the active task's last batch committed (an alert: no commit for N batch intervals)",
            ["task"],
            registry=registry,
        )
        self.step_seconds = Histogram(
            "streamapp_executor_step_seconds",
            "One round of batches: one micro-batch per due active task, in one Spark job",
            registry=registry,
        )
        self.round_began: float | None = None  # wall clock, while a round runs (`_work`)

    @contextlib.contextmanager
    def batch_round(self) -> Iterator[None]:
        """Time one round of batches, and know while it runs when it began (`batch_running_since`)."""
        self.round_began = time.time()
        try:
            with self.step_seconds.time():
                yield
        finally:
            self.round_began = None

    def batch_running_since(self) -> float | None:
        """When the running round began, once it has run over `BATCH_NOTICE_SECONDS`: a round that
        hangs (a stuck Spark) is what the operator's `batchTimeout` replaces the member for."""
        began = self.round_began
        return began if began is not None and time.time() - began > BATCH_NOTICE_SECONDS else None

    def apply(self, target: StreamAppMemberSpec) -> None:
        """Revoked tasks commit and stop inside `Executor.apply`, before the acknowledgement."""
        self.executor.apply(Target.of(target))

    def restore_rate(self) -> float | None:
        return self.executor.restore_rate()

    def reports(self) -> list[TaskReport]:
        rows = []
        self.lag.clear()
        self.offset.clear()
        self.restored.clear()
        statuses = self.executor.status()
        for s in statuses:
            rows.append(
                TaskReport(
                    task=s.partition,
                    role=REPORTED_ROLES[s.role],
                    epoch=s.epoch,
                    applied_seq=s.applied_seq,
                    applied_offset=s.applied_offset,
                    lag=s.lag,
                    input_lag=s.input_lag,
                    store_epoch=s.store_epoch,
                    fenced_by=s.fenced_by,
                    restored_blocking=s.restored_blocking,
                    restored_background=s.restored_background,
                    resumed_after=round(s.resumed.seconds, 1) if s.resumed is not None else None,
                    resumed_by=s.resumed.by if s.resumed is not None else None,
                    restore_rows=s.restore_rows,
                    full_restores=s.full_restores or None,
                    full_restore_reason=s.full_restore_reason,
                )
            )
            self.restored.labels(task=str(s.partition), mode="blocking").set(s.restored_blocking)
            self.restored.labels(task=str(s.partition), mode="background").set(s.restored_background)
            self.lag.labels(task=str(s.partition), role=s.role.value).set(s.lag)
            self.offset.labels(task=str(s.partition), role=s.role.value).set(s.applied_offset)
        self._count_full_restores()
        self._count_commits(statuses)
        return rows

    def _count_commits(self, statuses: list[TaskStatus]) -> None:
        """The records each task committed here, and when it last committed."""
        self.last_commit.clear()
        for s in statuses:
            self.committed_totals.report(str(s.partition), s.committed_records)
            if s.last_commit_at is not None:
                self.last_commit.labels(task=str(s.partition)).set(s.last_commit_at)

    def _count_full_restores(self) -> None:
        """The full restores counted so far (`RestoreMeter.fell_back`), by reason."""
        for reason, count in self.executor.full_restore_counts().items():
            self.full_restore_totals.report(reason, count)


class Totals:
    """A Counter fed with running totals the data plane keeps, one per value of `label`: each report
    adds what grew since the last. A total that went down (a task back on this executor counts from
    zero again) adds all of itself."""

    def __init__(self, counter: Counter, label: str) -> None:
        self.counter = counter
        self.label = label
        self.seen: dict[str, int] = {}

    def report(self, value: str, total: int) -> None:
        seen = self.seen.get(value, 0)
        grown = total - seen if total >= seen else total
        if grown:
            self.counter.labels(**{self.label: value}).inc(grown)
        self.seen[value] = total


def register(subparsers: Any) -> None:
    """Add the `executor` subcommand."""
    parser = subparsers.add_parser(
        "executor", help="run a member pod's executor (membership + PySpark runtime)"
    )
    parser.add_argument(
        "--from-cluster",
        action="store_true",
        required=True,
        help="take identity and pipeline from the pod's STREAMAPP_* environment (set by the operator)",
    )
    parser.add_argument(
        "--http-port",
        type=int,
        default=int(os.environ.get("STREAMAPP_HTTP_PORT", "8080")),
        help="port of /readyz, /healthz and /metrics (0: none; default $STREAMAPP_HTTP_PORT or 8080)",
    )
    parser.add_argument(
        "--http-address",
        default=os.environ.get("STREAMAPP_HTTP_ADDRESS", ""),
        help="address they bind: the pod's IP, where probes and scrapers reach it (default "
        "$STREAMAPP_HTTP_ADDRESS, else every interface)",
    )
    parser.add_argument(
        "--report-interval",
        type=float,
        default=2.0,
        help="seconds between reports of what the operator acts on (roles, acknowledgements, caught-up copies)",
    )
    parser.add_argument(
        "--progress-interval",
        type=float,
        default=float(os.environ.get("STREAMAPP_PROGRESS_INTERVAL", "10")),
        help="seconds between reports that change only progress figures: lags, applied positions "
        "(default $STREAMAPP_PROGRESS_INTERVAL or 10)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Start Spark, serve health, follow the member's target until SIGTERM, then hand everything back."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    try:
        settings = PodSettings.from_env(os.environ)
    except (SetupError, ValueError) as error:
        log.error("cannot start: %s", error)
        return 2
    try:
        pipeline = pipelines.load(settings.transform, merge=settings.merge, lateness=settings.lateness)
        local = (
            LocalState(settings.local_path, settings.local_store, pipeline.value_type)
            if settings.local_path
            else None
        )
        state = settings.state(check=True)
        source, sink = settings.source(), settings.sink()
    except (SetupError, ValueError, ImportError, AttributeError, LocalStateError) as error:
        log.error("cannot start: %s", error)
        report_setup_error(
            _api, settings.namespace, settings.app, settings.member, settings.pod_uid, str(error)
        )
        return 2
    executor = Executor(
        StateLayout(state),
        source,
        sink,
        pipeline,
        TaskConfig(
            owner=settings.pod_name or f"{settings.app}-{settings.member}", retention=settings.retention
        ),
        spark=lambda: session(settings.spark),
        local=local,
    )
    problem = start_spark(settings, pipeline)
    if problem is not None:
        log.error("cannot start: %s", problem)
        report_setup_error(_api, settings.namespace, settings.app, settings.member, settings.pod_uid, problem)
        return 2
    registry = CollectorRegistry()
    plane = RuntimeDataPlane(executor, registry)
    stop, terminated = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: _stop(terminated, signum, frame))
    membership = MembershipClient(
        _api(),
        settings.namespace,
        settings.app,
        settings.member,
        settings.pod_uid,
        plane,
        args.report_interval,
        ClientSettings(progress_interval=args.progress_interval),
    )
    if args.http_port:
        serve(args.http_address, args.http_port, registry, membership.healthy)
    failures: list[BaseException] = []
    worker = threading.Thread(target=_work, args=(plane, stop, failures), name="tasks", daemon=True)
    worker.start()
    pod = settings.pod_name or f"{settings.app}-{settings.member}"
    threading.Thread(
        target=drain.follow_until_drained,
        args=(
            terminated,
            stop,
            settings.drain_seconds,
            lambda: drain.restarted_by_operator(_api(), settings.namespace, pod),
            lambda: (membership.seen, membership.current),
        ),
        name="drain",
        daemon=True,
    ).start()
    log.info("member %s of %s/%s ready", settings.member, settings.namespace, settings.app)
    membership.run(stop)
    worker.join()
    if failures:
        return 1
    executor.apply(Target())
    log.info("stopped: every task committed and released")
    return 0


def _spark(env: Mapping[str, str], conf: dict[str, str]) -> tuple[SparkSettings, Path | None]:
    """Spark in the pod (`spark.master` from sparkConf, local by default), or on the cluster when the
    operator passed `spec.executor.sparkExecutors` (then with the path of its executors' pod template)."""
    raw = env.get(SPARK_EXECUTORS_ENV)
    if not raw:
        return SparkSettings(master=conf.pop("spark.master", "local[*]"), conf=conf), None
    try:
        executors = SparkExecutors.from_dict(_json(env, SPARK_EXECUTORS_ENV), "spec.executor.sparkExecutors")
        template = sparkk8s.template_path(env)
        return sparkk8s.driver_settings(executors, conf, env, template), template
    except ValueError as error:  # the model's ValidationError, or a variable the pod lacks
        raise SetupError(f"{SPARK_EXECUTORS_ENV}: {error}") from None


def start_spark(settings: PodSettings, pipeline: pipelines.Pipeline) -> str | None:
    """Start the process's Spark session with the app's sparkConf and run the pipeline's warm-up round;
    what went wrong, in a line or two, or None. A sparkConf Spark refuses (or a pipeline that fails on
    made-up rows) is the spec's fault, not a crash: it is reported in the member's status, where the
    operator shows it in the app's Degraded condition, instead of a crash loop that says nothing."""
    try:
        if settings.spark_template is not None:
            sparkk8s.write_template(settings.spark_template, _own_pod(settings))
        pipelines.warm_up(pipeline, session(settings.spark))
    except Exception as error:  # whatever Spark or the user's code raises, it is said, not thrown
        first = " ".join(str(error).split())[:SETUP_MESSAGE_CHARS]
        return f"Spark did not start with spec.executor.sparkConf and the pipeline: {type(error).__name__}: {first}"
    return None


def _own_pod(settings: PodSettings) -> dict[str, Any]:
    """The member's pod as the API server admitted it (camelCase), which Spark's executor pods are
    derived from (its Role lets it read its own pod)."""
    response: Any = client.CoreV1Api(_api()).read_namespaced_pod(
        settings.pod_name, settings.namespace, _request_timeout=(10.0, 10.0), _preload_content=False
    )  # the raw response (a urllib3 one): the pod's own JSON, camelCase as Spark reads templates
    found: dict[str, Any] = json.loads(response.data)
    return found


def _work(plane: RuntimeDataPlane, stop: threading.Event, failures: list[BaseException]) -> None:
    """Process until stopped, restores and copies on a lane of their own beside the batches; a failing
    step stops the whole member, so the pod restarts visibly instead of lingering ready while its tasks
    are not processed."""
    try:
        with plane.executor.copy_lane(IDLE_SECONDS):
            while not stop.is_set():
                with plane.batch_round():
                    done = plane.executor.step()
                if done == 0:
                    plane.executor.idle(IDLE_SECONDS)
    except Exception as error:
        log.exception("task processing failed; stopping this member")
        failures.append(error)
        stop.set()


def _stop(stop: threading.Event, signum: int, frame: FrameType | None) -> None:
    del signum, frame
    stop.set()


def _api() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def serve(
    address: str, port: int, registry: CollectorRegistry, following: Callable[[], bool]
) -> ThreadingHTTPServer:
    """Readiness, liveness and Prometheus metrics, on the pod's IP: that is where the kubelet probes
    and Prometheus scrapes, and nothing else listens.

    Both probes need the process up and Spark started (nothing is served before). `/readyz` also needs
    the member to be `following` its target (the membership watch heard from the API server lately):
    a member deaf to its target must not count as alive, or its tasks would wait on it. `/healthz`
    does not: a restart would not bring the API server back, it would only make every task restore.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/readyz" and not following():
                self.send_error(503, "not following the member's target (API server unreachable)")
                return
            if self.path in ("/readyz", "/healthz"):
                body, kind = b"ok", "text/plain"
            elif self.path == "/metrics":
                body, kind = generate_latest(registry), "text/plain; version=0.0.4"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    server = ThreadingHTTPServer((address, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server


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


def _json(env: Mapping[str, str], name: str) -> dict[str, Any]:
    try:
        value = json.loads(env.get(name) or "{}")
    except json.JSONDecodeError as error:
        raise SetupError(f"{name} is not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise SetupError(f"{name} must be a JSON object")
    return value
