"""Running the operator in tests and talking to the app it manages (shared by operator test modules)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from kubernetes import client

from kubesetup import kwok_app
from streamapp.api.names import APPS, GROUP, VERSION

STREAMAPP = Path(sys.executable).with_name("streamapp")
APP = "counts"


class Operator:
    """A `streamapp operator` process watching one namespace."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        log: Path,
        identity: str,
        leader_election: bool,
        extra: tuple[str, ...] = (),
        metrics_port: int = 0,
    ) -> None:
        args = [
            str(STREAMAPP),
            "operator",
            "--namespace",
            namespace,
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-port",
            str(metrics_port),
            "--lease-namespace",
            namespace,
            "--identity",
            identity,
        ]
        if not leader_election:
            args.append("--no-leader-election")
        args.extend(extra)
        self.log = log
        self.identity = identity
        self.process = subprocess.Popen(args, stdout=log.open("ab"), stderr=subprocess.STDOUT)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no lease release (a crash or a lost node)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


class Operators:
    """The operator processes of one test; all are stopped (and their logs shown) afterwards."""

    def __init__(self, kubeconfig: Path, namespace: str, logs: Path) -> None:
        self.kubeconfig, self.namespace, self.logs = kubeconfig, namespace, logs
        self.started: list[Operator] = []

    def start(
        self,
        identity: str = "op-1",
        leader_election: bool = False,
        extra: tuple[str, ...] = (),
        metrics_port: int = 0,
    ) -> Operator:
        """An operator process; ``metrics_port`` 0 serves no /metrics."""
        log = self.logs / f"{identity}.log"
        operator = Operator(
            self.kubeconfig, self.namespace, log, identity, leader_election, extra, metrics_port
        )
        self.started.append(operator)
        return operator

    def stop_all(self) -> None:
        for operator in self.started:
            operator.stop()
        for operator in self.started:
            tail = "".join(operator.log.read_text().splitlines(True)[-40:])
            sys.stderr.write(f"--- {operator.identity} log tail ---\n{tail}")


def create_app(
    api: client.ApiClient, namespace: str, replicas: int, partitions: int, **rebalance: Any
) -> None:
    settings = {"scheduledRebalanceMaxDelay": "5m", **rebalance}
    body = kwok_app(APP, replicas, partitions, "streamapp/executor:dev", **settings)
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)


def app(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP)
    )


def patch_app(api: client.ApiClient, namespace: str, patch: dict[str, Any]) -> None:
    """A merge patch of the app, as `kubectl patch --type merge` sends it."""
    client.CustomObjectsApi(api).patch_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP, patch)


def scale(api: client.ApiClient, namespace: str, replicas: int) -> None:
    """Through the /scale subresource, as `kubectl scale` and an HPA do."""
    client.CustomObjectsApi(api).patch_namespaced_custom_object_scale(
        GROUP, VERSION, namespace, APPS, APP, {"spec": {"replicas": replicas}}
    )


def reasons(api: client.ApiClient, namespace: str) -> list[str]:
    """Reasons of the Events the operator posted on the app."""
    events = (
        client.CoreV1Api(api)
        .list_namespaced_event(namespace, field_selector=f"involvedObject.name={APP}")
        .items
    )
    return [e.reason for e in events]
