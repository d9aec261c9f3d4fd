"""The faults a chaos run injects, each acting on real processes as a crash or a hang would.

Executors are SIGKILLed as a process group (the pod's process and its JVM) through the PID records the
process node keeps, so the pod restarts in place (restartPolicy Always) with the same uid. Operators
run as two leader-electing replicas: the leader is SIGKILLed (and started again, like a Deployment
would) or paused with SIGSTOP for longer than its lease, then continued. The kube-apiserver is
restarted through the local cluster's fault helpers.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from kubernetes import client

from localcluster.controlplane import LocalCluster
from processnode import pidfiles, procfs
from streamapp.api.names import selector

LEASE_NAME = "streamapp-operator"
REQUEST_TIMEOUT_S = 5.0


class Kind(Enum):
    """Fault kinds, in the order the report lists them."""

    EXECUTOR_KILL = "executor SIGKILL"
    OPERATOR_KILL = "operator leader SIGKILL mid-rebalance, restarted"
    LEADER_PAUSE = "operator leader SIGSTOP/SIGCONT"
    APISERVER_RESTART = "kube-apiserver restart"
    SCALE = "scale out/in"


class OperatorProcess(Protocol):
    """What the chaos run needs of an operator process (tests/integration/operator_support.Operator)."""

    identity: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None: ...


OperatorStarter = Callable[[str, bool], OperatorProcess]


@dataclass
class Operators:
    """The operator replicas of a run, by identity; a killed one is started again under its name."""

    start: OperatorStarter
    replicas: dict[str, OperatorProcess]

    @staticmethod
    def launch(start: OperatorStarter, identities: tuple[str, ...]) -> Operators:
        return Operators(start, {name: start(name, True) for name in identities})

    def ensure_running(self) -> None:
        """Continue paused replicas and restart exited ones (a replica that lost its lease exits)."""
        for name, replica in list(self.replicas.items()):
            if replica.process.poll() is None:
                replica.process.send_signal(signal.SIGCONT)
            else:
                self.replicas[name] = self.start(name, True)


def leader(api: client.ApiClient, namespace: str) -> str | None:
    """Identity holding the operator's Lease, or None when nobody does (or the API is away)."""
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            LEASE_NAME, namespace, _request_timeout=REQUEST_TIMEOUT_S
        )
    except Exception:
        return None
    holder = lease.spec.holder_identity if lease.spec else None
    return str(holder) if holder else None


def leader_or_any(api: client.ApiClient, namespace: str, operators: Operators, rng: random.Random) -> str:
    holder = leader(api, namespace)
    return holder if holder in operators.replicas else rng.choice(sorted(operators.replicas))


def kill_leader(
    api: client.ApiClient, namespace: str, operators: Operators, rng: random.Random, down_s: float
) -> str:
    """SIGKILL the leader (no lease release) and start it again after `down_s`."""
    name = leader_or_any(api, namespace, operators, rng)
    operators.replicas[name].kill()
    time.sleep(down_s)
    operators.replicas[name] = operators.start(name, True)
    return f"killed leader {name}, restarted after {down_s:.1f}s"


def pause_leader(
    api: client.ApiClient, namespace: str, operators: Operators, rng: random.Random, pause_s: float
) -> str:
    """SIGSTOP the leader for `pause_s` (past its renew deadline when long), then SIGCONT it."""
    name = leader_or_any(api, namespace, operators, rng)
    process = operators.replicas[name].process
    process.send_signal(signal.SIGSTOP)
    try:
        time.sleep(pause_s)
    finally:
        process.send_signal(signal.SIGCONT)
    return f"paused leader {name} for {pause_s:.1f}s"


def executor_pid(process_node_dir: Path, pod_uid: str) -> tuple[int, int] | None:
    """PID and start ticks of the running container process of a pod, from the process node's records."""
    newest: tuple[int, int, int] | None = None
    for path in pidfiles.directory(process_node_dir).glob(f"{pod_uid}-*.json"):
        restarts = path.stem.rsplit("-", 1)[-1]
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if data.get("start_ticks") is None or not procfs.is_running(data["pid"], data["start_ticks"]):
            continue
        candidate = (int(restarts) if restarts.isdigit() else -1, int(data["pid"]), int(data["start_ticks"]))
        newest = max(newest, candidate) if newest else candidate
    return (newest[1], newest[2]) if newest else None


def kill_executor(
    api: client.ApiClient, namespace: str, app: str, cluster: LocalCluster, rng: random.Random
) -> str:
    """SIGKILL the process group of a random member pod whose executor is running."""
    pods = client.CoreV1Api(api).list_namespaced_pod(
        namespace, label_selector=selector(app), _request_timeout=REQUEST_TIMEOUT_S
    )
    candidates = []
    for pod in pods.items:
        meta = pod.metadata
        found = executor_pid(cluster.layout.process_node, str(meta.uid)) if meta else None
        if meta and found is not None:
            candidates.append((str(meta.name), *found))
    if not candidates:
        return "no running executor to kill"
    name, pid, ticks = rng.choice(sorted(candidates))
    if procfs.is_running(pid, ticks):
        procfs.signal_group(pid, signal.SIGKILL)
    return f"SIGKILLed {name} (pid {pid})"


def restart_apiserver(cluster: LocalCluster) -> str:
    """Stop the kube-apiserver (SIGTERM) and start it again; returns once it serves."""
    began = time.monotonic()
    cluster.restart_component("kube-apiserver")
    return f"kube-apiserver restarted, serving again after {time.monotonic() - began:.1f}s"
