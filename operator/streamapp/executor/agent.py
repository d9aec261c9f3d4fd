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

This module is the loop; the member's settings are `podsettings`, its HTTP endpoints `probes`, and the
runtime as the membership client drives it `runtimeplane`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
from types import FrameType
from typing import Any

from kubernetes import client, config
from prometheus_client import CollectorRegistry

from streamapp.executor import drain, sparkk8s
from streamapp.executor import pipeline as pipelines
from streamapp.executor.membership import MembershipClient, report_setup_error
from streamapp.executor.memberwatch import ClientSettings
from streamapp.executor.podsettings import PodSettings, SetupError
from streamapp.executor.probes import serve
from streamapp.executor.runtime import LOG_FORMAT, Executor, Target
from streamapp.executor.runtimeplane import RuntimeDataPlane
from streamapp.executor.spark import session
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import LocalState, LocalStateError
from streamapp.executor.task import TaskConfig

log = logging.getLogger("streamapp.executor")
IDLE_SECONDS = 0.2
SETUP_MESSAGE_CHARS = 600


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
