"""`streamapp operator`: run the controller, behind a Lease when leader election is on."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from typing import Any

import kopf
from kubernetes import client, config

from streamapp.controller import endpoints
from streamapp.controller.admission import ALLOW_FLAG, SPARK_ALLOW_FLAG, PodPolicy
from streamapp.controller.backoff import Backoffs
from streamapp.controller.handlers import lighten, relists, watch_only_members
from streamapp.controller.handlers import register as register_handlers
from streamapp.controller.health import Health, beating
from streamapp.controller.kube import Kube
from streamapp.controller.leader import LeaseConfig, LeaseLock, Renewals, bounded_client, lead
from streamapp.controller.loops import MIN_RECONCILE_INTERVAL_SECONDS, AppLoops
from streamapp.controller.metrics import Metrics
from streamapp.controller.relist import Lister

log = logging.getLogger("streamapp.operator")
LOG_LEVELS = ("debug", "info", "warning", "error")


def register(subparsers: Any) -> None:
    """Add the `operator` subcommand."""
    parser = subparsers.add_parser("operator", help="run the StreamApp operator")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", action="append", help="namespace to watch (repeatable)")
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace (default)")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="port of /metrics (Prometheus) and /healthz (the probes); 0 disables both",
    )
    parser.add_argument(
        "--metrics-address",
        default="0.0.0.0",
        help="address the metrics server binds (in a pod: its IP, passed from status.podIP)",
    )
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: the pod's ServiceAccount in a cluster, else $KUBECONFIG)",
    )
    parser.add_argument(
        ALLOW_FLAG,
        action="store_true",
        help="run pod templates that ask for privileges (privileged, host namespaces, hostPath, root, "
        "added capabilities); by default such apps are refused with reason InvalidSpec",
    )
    parser.add_argument(
        SPARK_ALLOW_FLAG,
        action="store_true",
        help="run apps with spec.executor.sparkExecutors, whose members' ServiceAccounts may then create "
        "pods in their namespace (Spark's executors); by default such apps are refused with reason "
        "InvalidSpec",
    )
    parser.add_argument(
        "--min-reconcile-interval",
        type=float,
        default=MIN_RECONCILE_INTERVAL_SECONDS,
        metavar="SECONDS",
        help="least time between two reconciles of one app: member reports meanwhile coalesce into one "
        f"(default {MIN_RECONCILE_INTERVAL_SECONDS:g})",
    )
    parser.add_argument("--no-leader-election", action="store_true", help="act without holding the Lease")
    parser.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE", "default"))
    parser.add_argument("--lease-name", default="streamapp-operator")
    parser.add_argument("--identity", default=os.environ.get("POD_NAME") or socket.gethostname())
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="the least severe messages logged (default info)",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="json: one object a line (message, timestamp, severity), for log pipelines (default text)",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="the same as --log-level debug")
    parser.set_defaults(run=run)


def configure_logging(level: str, log_format: str) -> None:
    """Log at `level` and above, as text or one JSON object a line, through kopf's own log setup (its
    handlers and the operator's share one format)."""
    kopf.configure(
        debug=level == "debug",
        log_format=kopf.LogFormat.JSON if log_format == "json" else kopf.LogFormat.FULL,
    )
    logging.getLogger().setLevel(level.upper())
    if level != "debug":
        # kopf logs every handler run at INFO ("Handler ... succeeded"): one line per watch event, 500
        # a second when 1,000 members report every 2 s. The handlers only set wake flags; what the
        # reconciles do is logged by the operator's own loggers.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def run(args: argparse.Namespace) -> int:
    """Log in, serve metrics, then lead (or just act) until SIGTERM or SIGINT.

    Both clients log in the same way, through kopf's own login handlers: the watches (kopf) and the
    writes (the official client) use the ServiceAccount in a pod and the kubeconfig elsewhere.
    """
    configure_logging("debug" if args.verbose else args.log_level, args.log_format)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig  # what kopf's kubeconfig login reads
    load_client_config(args.kubeconfig)
    api = bounded_client()
    metrics, health = Metrics(), Health()
    if args.metrics_port:
        endpoints.serve(args.metrics_port, args.metrics_address, metrics.registry, health)
    with _stopped_by_signals() as shutdown:
        if args.no_leader_election:
            asyncio.run(_act(api, metrics, health, args, shutdown))
        else:
            _lead(api, metrics, health, args, shutdown)
    return 0


def load_client_config(kubeconfig: str | None) -> None:
    """Configure the official client as kopf's login will: the named kubeconfig, else the pod's
    ServiceAccount in a cluster, else `$KUBECONFIG` (or ~/.kube/config)."""
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig)
        return
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM (what every rollout and `kubectl delete` sends) or SIGINT, so that
    shutdown is the same orderly path: stop acting, then release the Lease."""
    shutdown = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    def stop(signum: int, _: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        shutdown.set()

    for sig in previous:
        signal.signal(sig, stop)
    try:
        yield shutdown
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _lead(
    api: client.ApiClient,
    metrics: Metrics,
    health: Health,
    args: argparse.Namespace,
    shutdown: threading.Event,
) -> None:
    """Act while holding the Lease (`leader.lead`)."""
    lease = LeaseConfig(args.lease_namespace, args.lease_name, args.identity)

    def act(stop: threading.Event) -> None:
        metrics.leader.set(1)
        try:
            asyncio.run(_act(api, metrics, health, args, stop))
        finally:
            metrics.leader.set(0)

    lead(Renewals(LeaseLock(api, lease)), act, shutdown)


async def _act(
    api: client.ApiClient,
    metrics: Metrics,
    health: Health,
    args: argparse.Namespace,
    stop: threading.Event,
) -> None:
    """Run kopf with our handlers until `stop` is set; `health` hears the event loop beat and the
    reconciles start and end (`controller.health`)."""
    registry = kopf.OperatorRegistry()
    policy = PodPolicy(
        allow_privileged=args.allow_privileged_pod_templates,
        allow_spark_executors=args.allow_spark_executors,
    )
    loops = AppLoops(
        Kube(api, leading=lambda: not stop.is_set()),
        metrics,
        policy,
        min_interval=args.min_reconcile_interval,
        health=health,
    )
    relisted = relists(Lister(api, tuple(args.namespace or ())), loops)
    register_handlers(registry, loops, explicit_kubeconfig=bool(args.kubeconfig), relisted=relisted)
    settings = kopf.OperatorSettings()
    watch_only_members(settings)
    lighten(settings)
    settings.peering.standalone = True
    _survive_api_outages(settings)
    settings.posting.enabled = False
    stop_flag: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def watch_stop() -> None:
        while not stop.is_set():
            await asyncio.sleep(0.2)
        stop_flag.set_result(None)

    watcher = asyncio.create_task(watch_stop())
    health.act(True)
    beats = asyncio.create_task(beating(health, stop.is_set))
    try:
        await kopf.operator(
            registry=registry,
            settings=settings,
            clusterwide=not args.namespace,
            namespaces=args.namespace or (),
            stop_flag=stop_flag,
        )
    finally:
        health.act(False)
        beats.cancel()
        watcher.cancel()
        await loops.stop_all()


def _survive_api_outages(settings: kopf.OperatorSettings) -> None:
    """kopf's watches and calls, made to outlive any API-server outage and to resume soon after it.

    kopf 1.45 retries a failed call (connection errors, timeouts, 5xx, 403, 429) after each delay of
    `networking.error_backoffs` and raises once they run out; a watch survives only the connection
    errors and timeouts that escape, while any other (a restarting API server answers 403 and 5xx for
    a while) ends the watcher task and with it the whole operator. An endless series of delays capped
    at 5 s (`backoff.Backoffs`) keeps every watch retrying and reconnecting within 5 s of the API
    server's return; a dropped watch then resumes from its last version or lists again (410 Gone).
    Timeouts bound every call, so a hung connection (a paused or unreachable API server) fails and is
    retried rather than blocking: kopf ends a silent watch after `watching.inactivity_timeout` (70 s;
    bookmarks and the server's own end of each watch come sooner).
    """
    settings.networking.error_backoffs = Backoffs(initial=1.0, cap=5.0)
    settings.networking.request_timeout = 60
    settings.networking.connect_timeout = 10
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 0.5
