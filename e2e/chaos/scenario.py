"""One chaos run: a real count app under continuous input, scaled and hit by seeded random faults.

The run plans its faults up front from a seed (kinds, counts and times bounded by the config), runs
them one after another while the observer watches, then lets the system recover: every operator
running, input stopped, all input committed, the app converged. Output exactly once is then checked
partition by partition against a reference computed from the input.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataplane_checks import check_partition
from kubernetes import client

from chaos import faults
from chaos.faults import Kind, Operators, OperatorStarter
from chaos.observer import Observer, Tally, current_reports
from localcluster.controlplane import LocalCluster
from localcluster.waiting import wait_for
from realapps import app_on_process_node, committed_everything
from streamapp.api.names import APPS, GROUP, MEMBERS, VERSION, selector
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

APP = "chaos"
OPERATOR_IDENTITIES = ("op-a", "op-b")
SETTLE_TIMEOUT_S = 900.0
LOG = logging.getLogger("chaos")


@dataclass(frozen=True)
class ChaosConfig:
    """How long, how hard: counts of each fault kind within `duration_s` (scales are out then in)."""

    duration_s: float
    seed: int
    executor_kills: int
    operator_kills: int
    leader_pauses: int
    apiserver_restarts: int
    partitions: int = 4
    replicas: tuple[int, int, int] = (2, 3, 2)
    rate: float = 200.0
    keys: int = 50


@dataclass(frozen=True)
class Fault:
    at_s: float
    kind: Kind


def plan(config: ChaosConfig) -> list[Fault]:
    """Seeded fault times; pure. Scale-out at 20 %, scale-in at 55 % of the run, an operator kill
    right after each (mid-rebalance) while kills remain, the rest spread uniformly."""
    rng = random.Random(config.seed)
    span = config.duration_s
    scales = [Fault(0.20 * span, Kind.SCALE), Fault(0.55 * span, Kind.SCALE)]
    paired = [Fault(s.at_s + 1.0, Kind.OPERATOR_KILL) for s in scales][: config.operator_kills]
    counts = {
        Kind.EXECUTOR_KILL: config.executor_kills,
        Kind.OPERATOR_KILL: config.operator_kills - len(paired),
        Kind.LEADER_PAUSE: config.leader_pauses,
        Kind.APISERVER_RESTART: config.apiserver_restarts,
    }
    spread = [Fault(rng.uniform(0.05, 0.9) * span, kind) for kind, n in counts.items() for _ in range(n)]
    return sorted([*scales, *paired, *spread], key=lambda f: f.at_s)


@dataclass
class Outcome:
    """What a run did and saw; rendered by chaos.report."""

    config: ChaosConfig
    injected: Counter[Kind] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    records: int = 0
    batches: int = 0
    chaos_s: float = 0.0
    recovery_s: float = 0.0


@dataclass
class Environment:
    """The cluster a run uses (the integration fixtures, or the ones `make chaos` sets up)."""

    api: client.ApiClient
    observer_api: client.ApiClient
    namespace: str
    cluster: LocalCluster
    start_operator: OperatorStarter
    workdir: Path


def app_body(config: ChaosConfig, workdir: Path) -> dict[str, Any]:
    """The count app on the process node, reading `workdir/input`, its store a host directory."""
    return app_on_process_node(
        APP, workdir, config.partitions, config.replicas[0], maxWarmupReplicas=config.partitions
    )


def retried(action: Callable[[], object], timeout_s: float = 120.0) -> None:
    """Run an API call until it goes through (the API server may be restarting under it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            action()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def scale(api: client.ApiClient, namespace: str, replicas: int) -> None:
    retried(
        lambda: client.CustomObjectsApi(api).patch_namespaced_custom_object_scale(
            GROUP, VERSION, namespace, APPS, APP, {"spec": {"replicas": replicas}}
        )
    )


def converged(api: client.ApiClient, namespace: str, config: ChaosConfig) -> bool:
    """Ready, not rebalancing, nothing revoking or warming, every task active on exactly one member
    (by the reports of the processes running now), the final member count."""
    custom = client.CustomObjectsApi(api)
    app: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP)
    status = app.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    tasks = status.get("tasks") or {}
    listed: dict[str, Any] = custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, MEMBERS, label_selector=selector(APP)
    )
    members = listed["items"]
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector(APP)).items
    reports = current_reports(members, pods)
    active = Counter(int(t["task"]) for r in reports.values() for t in r if t.get("role") == "active")
    return (
        conditions.get("Ready") == "True"
        and conditions.get("Rebalancing") == "False"
        and not tasks.get("revoking")
        and not tasks.get("warming")
        and len(status.get("members") or []) == config.replicas[-1]
        and not any((m.get("spec") or {}).get("revoking") for m in members)
        and active == Counter(range(config.partitions))
    )


def run(env: Environment, config: ChaosConfig) -> Outcome:
    """Run the scenario; raises (AssertionError) when output is not exactly once or nothing converges."""
    outcome = Outcome(config)
    rng = random.Random(config.seed + 1)
    log = FileLog(env.workdir / "input")
    state = StateLayout(env.workdir / "state")
    stopped = threading.Event()
    spec = GenerateSpec(partitions=config.partitions, count=None, rate=config.rate, keys=config.keys)
    generate(log, GenerateSpec(partitions=config.partitions, count=2_000, keys=config.keys))
    feeder = threading.Thread(
        target=generate, args=(log, spec), kwargs={"tick": 1.0, "stopped": stopped.is_set}, daemon=True
    )
    operators = Operators.launch(env.start_operator, OPERATOR_IDENTITIES)
    client.CustomObjectsApi(env.api).create_namespaced_custom_object(
        GROUP, VERSION, env.namespace, APPS, app_body(config, env.workdir)
    )
    wait_for(lambda: committed_everything(state, log, config.partitions), 600, "the app processing input")
    observer = Observer(env.observer_api, env.namespace, APP, state, config.partitions)
    observer.start()
    feeder.start()
    sizes = iter(config.replicas[1:])
    began = time.monotonic()
    try:
        for fault in plan(config):
            time.sleep(max(0.0, began + fault.at_s - time.monotonic()))
            operators.ensure_running()  # as a Deployment would: a replica that exited comes back
            try:
                line = inject(env, operators, fault.kind, sizes, rng)
                outcome.injected[fault.kind] += 1
            except Exception as error:  # e.g. no pod to kill yet: the run goes on, the log says so
                line = f"not injected: {error!r}"
            outcome.log.append(f"{time.monotonic() - began:7.1f}s {fault.kind.name}: {line}")
            LOG.warning("%s", outcome.log[-1])
        time.sleep(max(0.0, began + config.duration_s - time.monotonic()))
        outcome.chaos_s = time.monotonic() - began
        operators.ensure_running()
        stopped.set()
        feeder.join()
        wait_for(
            lambda: committed_everything(state, log, config.partitions),
            SETTLE_TIMEOUT_S,
            "all input committed after the chaos",
        )
        wait_for(lambda: converged(env.api, env.namespace, config), SETTLE_TIMEOUT_S, "convergence")
        outcome.recovery_s = time.monotonic() - began - outcome.chaos_s
    finally:
        stopped.set()
        operators.ensure_running()
        outcome.tally = observer.stop()
    for partition in range(config.partitions):
        outcome.batches += check_partition(state, env.workdir / "outputs", log, partition)
        outcome.records += log.end_offset(partition)
    return outcome


def inject(
    env: Environment, operators: Operators, kind: Kind, sizes: Iterator[int], rng: random.Random
) -> str:
    """Inject one fault; returns what was done."""
    if kind is Kind.SCALE:
        replicas = next(sizes)
        scale(env.api, env.namespace, replicas)
        return f"scaled to {replicas}"
    if kind is Kind.EXECUTOR_KILL:
        return faults.kill_executor(env.api, env.namespace, APP, env.cluster, rng)
    if kind is Kind.OPERATOR_KILL:
        return faults.kill_leader(env.api, env.namespace, operators, rng, rng.uniform(0.5, 3.0))
    if kind is Kind.LEADER_PAUSE:
        return faults.pause_leader(env.api, env.namespace, operators, rng, rng.uniform(3.0, 20.0))
    return faults.restart_apiserver(env.cluster)
