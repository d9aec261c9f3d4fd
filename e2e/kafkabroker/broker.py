"""Format and start a single-node KRaft broker on 127.0.0.1 as a plain java process; stop it again.

State lives in ``<root>/state.json`` (the process record and port) so ``down`` works from any process,
e.g. ``make cluster-down`` after a test session that was killed. The root defaults to
``$STREAMAPP_CLUSTER_DIR/kafka``: one broker per cluster directory, like the control plane.
"""

from __future__ import annotations

import base64
import fcntl
import json
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kafkabroker import jars
from localcluster import processes
from localcluster.controlplane import default_root
from localcluster.processes import ProcessRecord

STARTUP_TIMEOUT_S = 120.0
HEAP = "-Xmx384m"


def broker_root() -> Path:
    return default_root() / "kafka"


def new_cluster_id() -> str:
    """A random cluster id as Kafka writes them (URL-safe base64 of 16 bytes, unpadded).

    One id in 64 would start with "-", which the storage tool's argument parser reads as an option
    (a CI run failed so); Kafka's own generator draws again in that case, and so does this.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def server_properties(data: Path, port: int, controller_port: int) -> str:
    """The broker's configuration; pure. Replication factors of 1 because there is one node, and no
    initial rebalance delay because tests create groups and transactions right away."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


@dataclass(frozen=True)
class BrokerState:
    record: ProcessRecord
    port: int

    def to_json(self) -> str:
        return json.dumps({"record": self.record.to_json(), "port": self.port})

    @staticmethod
    def from_json(text: str) -> BrokerState:
        body = json.loads(text)
        return BrokerState(ProcessRecord.from_json(body["record"]), int(body["port"]))


class KafkaBroker:
    """One broker under `root` (see the module docstring)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or broker_root()

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    def state(self) -> BrokerState | None:
        try:
            return BrokerState.from_json(self.state_file.read_text())
        except FileNotFoundError:
            return None

    def is_running(self) -> bool:
        state = self.state()
        return state is not None and processes.is_alive(state.record) and processes.port_open(state.port)

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the running broker."""
        state = self.state()
        if state is None:
            raise RuntimeError(f"no Kafka broker recorded under {self.root}")
        return f"127.0.0.1:{state.port}"

    def up(self) -> str:
        """Start a freshly formatted broker unless one is running; returns its bootstrap address."""
        with self._exclusive():
            if not self.is_running():
                self._stop_and_clean()
                self._start()
            return self.bootstrap

    def down(self) -> None:
        """Stop the broker and drop its data (logs are kept)."""
        with self._exclusive():
            self._stop_and_clean()

    def _start(self) -> None:
        classpath = f"{jars.libs()}/*"
        data = self.root / "data"
        port, controller_port = processes.free_ports(2)
        config = self.root / "server.properties"
        config.write_text(server_properties(data, port, controller_port))
        cluster_id = new_cluster_id()
        java = ["java", HEAP, "-cp", classpath]
        log = self.root / "logs" / "broker.log"
        formatter = processes.spawn(
            "kafka-format",
            [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
            log,
        )
        processes.wait_until(lambda: not processes.is_alive(formatter), 60, "storage format", None)
        if not (data / "meta.properties").exists():
            raise RuntimeError(
                f"formatting the Kafka storage failed; {log} ends:\n{processes.log_tail(formatter)}"
            )
        record = processes.spawn("kafka", [*java, "kafka.Kafka", str(config)], log)
        self.state_file.write_text(BrokerState(record, port).to_json())
        processes.wait_until(lambda: processes.port_open(port), STARTUP_TIMEOUT_S, "Kafka listener", record)

    def _stop_and_clean(self) -> None:
        state = self.state()
        if state is not None:
            processes.stop(state.record, grace_s=20.0)
        self.state_file.unlink(missing_ok=True)
        shutil.rmtree(self.root / "data", ignore_errors=True)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Serialize up/down of one broker across processes (test sessions, make)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / ".lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
