"""Bring the local cluster up and down: PKI, etcd, apiserver, controllers, scheduler, kwok, nodes.

State (ports, PIDs) lives in ``<root>/state.json`` so ``down`` works from any process, e.g. ``make
cluster-down`` after ``make cluster-up``. A failed ``up`` tears down whatever it had started.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, config

from localcluster import build, certs, components, kubeconfig, nodes, processes, provisioner
from localcluster.processes import ProcessRecord
from processnode import pidfiles, procfs
from realnode import build as node_build
from realnode import network as node_network
from realnode import node as real_node

REPO_ROOT = Path(__file__).resolve().parents[2]
E2E_DIR = REPO_ROOT / "e2e"
STARTUP_TIMEOUT_S = 180.0
# Ports are picked free just before the components bind them; another program can win that race.
START_ATTEMPTS = 2


def default_root(real_node: bool = False) -> Path:
    """Where the cluster keeps its state: ``$STREAMAPP_CLUSTER_DIR`` or ``<repo>/.cluster``; the cluster
    with a real node ``$STREAMAPP_NODE_CLUSTER_DIR`` or ``<repo>/.cluster-node`` (both gitignored)."""
    if real_node:
        return Path(os.environ.get("STREAMAPP_NODE_CLUSTER_DIR") or REPO_ROOT / ".cluster-node")
    return Path(os.environ.get("STREAMAPP_CLUSTER_DIR") or REPO_ROOT / ".cluster")


def default_process_path() -> list[str]:
    """Directories put first on PATH for process-node pods: ``$STREAMAPP_PROCESS_NODE_PATH`` or .venv/bin.

    The project's executors run as ``streamapp executor ...``, which lives in the repo's virtualenv.
    """
    configured = os.environ.get("STREAMAPP_PROCESS_NODE_PATH")
    if configured:
        return [p for p in configured.split(os.pathsep) if p]
    return [str(REPO_ROOT / ".venv" / "bin")]


@dataclass(frozen=True)
class Layout:
    """Files and directories of one cluster under its root."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def component_kubeconfigs(self) -> Path:
        return self.root / "kubeconfigs"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def process_node(self) -> Path:
        return self.root / "process-node"

    @property
    def real_node(self) -> real_node.NodeLayout:
        """The real node's files, when the cluster has one (see :mod:`realnode`)."""
        return real_node.NodeLayout(self.root / "node")

    @property
    def volumes(self) -> Path:
        """Provisioned PersistentVolumes, one directory each (throw-away, like etcd's data)."""
        return self.root / "volumes"


@dataclass
class ClusterState:
    """What ``down`` needs: the started processes (in start order) and the ports they hold."""

    server: str = ""
    ports: dict[str, int] = field(default_factory=dict)
    processes: list[ProcessRecord] = field(default_factory=list)

    def save(self, path: Path) -> None:
        data = {
            "server": self.server,
            "ports": self.ports,
            "processes": [p.to_json() for p in self.processes],
        }
        path.write_text(json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> ClusterState | None:
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        records = [ProcessRecord.from_json(p) for p in data.get("processes", [])]
        return cls(data.get("server", ""), dict(data.get("ports", {})), records)


def _https_ok(url: str, context: ssl.SSLContext) -> bool:
    """True when ``url`` answers 200 (used for /readyz and /healthz)."""
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, ssl.SSLError):
        return False


def _port_closed(port: int) -> Callable[[], bool]:
    return lambda: not processes.port_open(port)


def _https_check(url: str, context: ssl.SSLContext) -> Callable[[], bool]:
    return lambda: _https_ok(url, context)


def _insecure_context() -> ssl.SSLContext:
    """For the controllers' health endpoints, served with self-signed certificates on loopback."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class LocalCluster:
    """A single-node-control-plane cluster of local processes; see ``e2e/README.md``."""

    def __init__(
        self, root: Path | None = None, process_path: list[str] | None = None, with_real_node: bool = False
    ) -> None:
        """``with_real_node``: a kubelet on containerd instead of kwok and the process node (the real-node
        tier; its pods run as containers of the built image)."""
        self.layout = Layout(root or default_root())
        self.process_path = process_path if process_path is not None else default_process_path()
        self.with_real_node = with_real_node
        self._state = ClusterState()

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (user ``admin`` in group ``system:masters``)."""
        return self.layout.kubeconfig

    def is_running(self) -> bool:
        """True when a state file exists and every recorded process is alive."""
        state = ClusterState.load(self.layout.state)
        return bool(state and state.processes and all(processes.is_alive(p) for p in state.processes))

    def up(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Start everything and wait until nodes are Ready; a no-op when already running."""
        with self._exclusive():
            if self.is_running():
                return
            self._stop_and_clean()
            if not (build.is_built() and provisioner.is_built()):
                build.ensure_built()
            if self.with_real_node and not node_build.is_built():
                node_build.ensure_built()
            for attempt in range(1, START_ATTEMPTS + 1):
                try:
                    self._start(timeout_s)
                    return
                except RuntimeError as error:  # a component exited, e.g. its free port was taken
                    self._stop_and_clean()
                    if attempt == START_ATTEMPTS:
                        raise
                    print(f"cluster start failed, retrying: {error}", flush=True)
                except BaseException:
                    self._stop_and_clean()
                    raise

    def pids(self) -> dict[str, int]:
        """The running components' process ids by name (what a benchmark reads their CPU time by)."""
        return {record.name: record.pid for record in self._load_state().processes}

    def down(self) -> None:
        """Stop every recorded process (newest first), free ports, drop state; logs are kept."""
        with self._exclusive():
            self._stop_and_clean()

    # Faults for tests: a component paused, killed, or restarted under running clients. Each acts on
    # the process recorded in the state file, so it works from any process (a test session reusing a
    # cluster that `make cluster-up` started, too).

    def pause_component(self, name: str) -> None:
        """SIGSTOP a component: a hung process, whose kernel still accepts connections that nothing
        answers (what a client sees of a frozen or unreachable API server)."""
        procfs.signal_group(self._record(name).pid, signal.SIGSTOP)

    def resume_component(self, name: str) -> None:
        """SIGCONT a paused component."""
        procfs.signal_group(self._record(name).pid, signal.SIGCONT)

    def kill_component(self, name: str) -> None:
        """SIGKILL a component and wait until it is gone (a crash); `start_component` brings it back."""
        processes.kill(self._record(name))

    def start_component(self, name: str, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Start a stopped component again with its recorded command line and wait until it serves
        (kube-apiserver: /readyz; etcd: /health)."""
        with self._exclusive():
            state = self._load_state()
            index, record = self._find(state, name)
            if processes.is_alive(record):
                raise RuntimeError(f"{name} is still running (pid {record.pid})")
            if not record.argv or name == "process-node":
                raise ValueError(f"{name} cannot be started again on its own; restart the cluster")
            started = processes.spawn(name, list(record.argv), Path(record.log))
            state.processes[index] = started
            state.save(self.layout.state)
            self._state = state
        self._wait_serving(started, state.server, timeout_s)

    def restart_component(self, name: str, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Stop a component gracefully (SIGTERM, SIGKILL after a grace period) and start it again."""
        processes.stop(self._record(name))
        self.start_component(name, timeout_s)

    def wait_component_ready(self, name: str, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        """Wait until a running component serves (see `start_component`)."""
        state = self._load_state()
        self._wait_serving(self._find(state, name)[1], state.server, timeout_s)

    def _load_state(self) -> ClusterState:
        state = ClusterState.load(self.layout.state)
        if state is None:
            raise RuntimeError(f"no cluster is running in {self.layout.root}")
        return state

    def _record(self, name: str) -> ProcessRecord:
        return self._find(self._load_state(), name)[1]

    @staticmethod
    def _find(state: ClusterState, name: str) -> tuple[int, ProcessRecord]:
        for index, record in enumerate(state.processes):
            if record.name == name:
                return index, record
        raise KeyError(f"no component {name!r}; known: {[r.name for r in state.processes]}")

    def _wait_serving(self, record: ProcessRecord, server: str, timeout_s: float) -> None:
        if record.name == "kube-apiserver":
            pki = self.layout.pki
            context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            context.load_cert_chain(pki / "client-admin.crt", pki / "client-admin.key")
            url = f"{server}/readyz"
            processes.wait_until(lambda: _https_ok(url, context), timeout_s, "kube-apiserver /readyz", record)
        elif record.name == "etcd":
            state = self._load_state()
            url = f"http://127.0.0.1:{state.ports['etcd_client']}/health"
            processes.wait_until(lambda: processes.http_ok(url), timeout_s, "etcd /health", record)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Serialize up/down of one cluster directory across processes (two test sessions, make)."""
        self.layout.root.mkdir(parents=True, exist_ok=True)
        with (self.layout.root / ".lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _stop_and_clean(self) -> None:
        state = ClusterState.load(self.layout.state) or self._state
        for record in reversed(state.processes):
            processes.stop(record)
        self._kill_leftover_pod_processes()
        if self.with_real_node or self.layout.real_node.base.exists():
            real_node.tear_down(self.layout.real_node)
        for port in state.ports.values():
            processes.wait_until(_port_closed(port), 10, f"port {port} to close")
        layout = self.layout
        for path in (
            layout.etcd_data,
            layout.pki,
            layout.component_kubeconfigs,
            layout.volumes,
            layout.real_node.base,
        ):
            shutil.rmtree(path, ignore_errors=True)
        for path in (self.layout.state, self.layout.kubeconfig):
            path.unlink(missing_ok=True)
        self._state = ClusterState()

    def _kill_leftover_pod_processes(self) -> None:
        """Safety net behind the process node's own shutdown: stop pod processes it recorded."""
        pidfiles.stop_all(self.layout.process_node)

    def _start(self, timeout_s: float) -> None:
        started = time.monotonic()
        layout = self.layout
        for previous_run in (layout.logs, layout.process_node):
            shutil.rmtree(previous_run, ignore_errors=True)
        for directory in (layout.root, layout.pki, layout.logs, layout.component_kubeconfigs):
            directory.mkdir(parents=True, exist_ok=True)
        ports = components.Ports(*processes.free_ports(len(dataclasses.fields(components.Ports))))
        address = self._apiserver_address()
        self._state = ClusterState(server=f"https://{address}:{ports.apiserver}", ports=vars(ports).copy())
        self._state.save(layout.state)
        ca, pki, configs = self._write_pki_and_kubeconfigs()
        bin_dir = build.bin_dir()
        self._start_etcd(bin_dir, ports, timeout_s)
        self._start_apiserver(bin_dir, pki, ports, address, timeout_s)
        self._start_controllers(bin_dir, pki, configs, ports, timeout_s)
        self._start_provisioner(configs["provisioner"], ports, timeout_s)
        if self.with_real_node:
            real_node.start(layout.real_node, ca, self._state.server, self._spawn, timeout_s)
        else:
            self._start_kwok(bin_dir, configs["kwok"], ports)
            self._register_kwok_nodes()
            self._start_process_node(configs["node"], ports)
        self._wait_for_workloads_ready(timeout_s)
        print(f"cluster up in {time.monotonic() - started:.1f}s; KUBECONFIG={layout.kubeconfig}", flush=True)

    def _apiserver_address(self) -> str:
        """Loopback, or with a real node the node's bridge address (created first, so it can be bound)."""
        if not self.with_real_node:
            return components.LOOPBACK
        node_network.ensure_bridge()
        return node_network.GATEWAY

    def _write_pki_and_kubeconfigs(
        self,
    ) -> tuple[certs.CertificateAuthority, components.Pki, dict[str, Path]]:
        """CA, serving and client certificates, SA keys, and one kubeconfig per client identity."""
        ca = certs.CertificateAuthority(self.layout.pki)
        serving = ca.issue(
            "apiserver",
            certs.Identity("kube-apiserver"),
            server_names=(
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
            server_ips=("127.0.0.1", "10.0.0.1", node_network.GATEWAY),
        )
        sa = certs.service_account_keys(self.layout.pki)
        # kube-apiserver's identity towards nodes (kubectl logs), as kubeadm issues it
        kubelet_client = ca.issue(
            "apiserver-kubelet-client", certs.Identity("kube-apiserver-kubelet-client", ("system:masters",))
        )
        ca.issue(
            "process-node-serving",
            certs.Identity(f"system:node:{nodes.PROCESS_NODE_NAME}", ("system:nodes",)),
            server_names=(nodes.PROCESS_NODE_NAME, "localhost"),
            server_ips=("127.0.0.1",),
        )
        # A CA of its own, as kubeadm does: a certificate it signs can assert any user to extension API
        # servers, so the cluster CA's client certificates must not be able to.
        front_proxy = certs.CertificateAuthority(self.layout.pki / "front-proxy", "streamapp-front-proxy-ca")
        proxy_client = front_proxy.issue("proxy-client", certs.Identity(components.FRONT_PROXY_CLIENT))
        pki = components.Pki(
            ca.pair.cert,
            ca.pair.key,
            serving.cert,
            serving.key,
            sa.cert,
            sa.key,
            kubelet_client.cert,
            kubelet_client.key,
            front_proxy.pair.cert,
            proxy_client.cert,
            proxy_client.key,
        )
        identities = {
            "admin": certs.Identity("admin", ("system:masters",)),
            "controller-manager": certs.Identity("system:kube-controller-manager"),
            "scheduler": certs.Identity("system:kube-scheduler"),
            "kwok": certs.Identity("kwok", ("system:masters",)),
            "provisioner": certs.Identity("streamapp-provisioner", ("system:masters",)),
            "node": certs.Identity(f"system:node:{nodes.PROCESS_NODE_NAME}", ("system:nodes",)),
        }
        server = self._state.server
        configs: dict[str, Path] = {}
        for name, identity in identities.items():
            pair = ca.issue(f"client-{name}", identity)
            target = (
                self.layout.kubeconfig
                if name == "admin"
                else self.layout.component_kubeconfigs / f"{name}.kubeconfig"
            )
            configs[name] = kubeconfig.write(target, server, ca.pair.cert, pair, identity.user)
        return ca, pki, configs

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> ProcessRecord:
        record = processes.spawn(name, argv, self.layout.logs / f"{name}.log", env)
        self._state.processes.append(record)
        self._state.save(self.layout.state)
        return record

    def _start_etcd(self, bin_dir: Path, ports: components.Ports, timeout_s: float) -> None:
        record = self._spawn("etcd", components.etcd(bin_dir, self.layout.etcd_data, ports))
        url = f"http://127.0.0.1:{ports.etcd_client}/health"
        processes.wait_until(lambda: processes.http_ok(url), timeout_s, "etcd /health", record)

    def _start_apiserver(
        self, bin_dir: Path, pki: components.Pki, ports: components.Ports, address: str, timeout_s: float
    ) -> None:
        record = self._spawn("kube-apiserver", components.kube_apiserver(bin_dir, pki, ports, address))
        context = ssl.create_default_context(cafile=str(pki.ca_cert))
        admin = self.layout.pki
        context.load_cert_chain(admin / "client-admin.crt", admin / "client-admin.key")
        url = f"{self._state.server}/readyz"
        processes.wait_until(lambda: _https_ok(url, context), timeout_s, "kube-apiserver /readyz", record)

    def _start_controllers(
        self,
        bin_dir: Path,
        pki: components.Pki,
        configs: dict[str, Path],
        ports: components.Ports,
        timeout_s: float,
    ) -> None:
        kcm = self._spawn(
            "kube-controller-manager",
            components.kube_controller_manager(bin_dir, configs["controller-manager"], pki, ports),
        )
        scheduler = self._spawn(
            "kube-scheduler", components.kube_scheduler(bin_dir, configs["scheduler"], ports)
        )
        context = _insecure_context()
        for record, port in ((kcm, ports.controller_manager), (scheduler, ports.scheduler)):
            url = f"https://127.0.0.1:{port}/healthz"
            processes.wait_until(_https_check(url, context), timeout_s, f"{record.name} /healthz", record)

    def _start_provisioner(self, config: Path, ports: components.Ports, timeout_s: float) -> None:
        """The hostpath provisioner, then the default StorageClass it serves (claims bind at once)."""
        argv = components.provisioner(
            provisioner.binary_path(), config, self.layout.volumes, ports.provisioner_metrics
        )
        record = self._spawn("provisioner", argv)
        url = f"http://127.0.0.1:{ports.provisioner_metrics}/metrics"
        processes.wait_until(lambda: processes.http_ok(url), timeout_s, "provisioner /metrics", record)
        storage = client.StorageV1Api(self._core_api().api_client)
        storage.create_storage_class(body=client.V1StorageClass.model_validate(provisioner.storage_class()))

    def _start_kwok(self, bin_dir: Path, config: Path, ports: components.Ports) -> None:
        self._spawn("kwok", components.kwok(bin_dir, build.kwok_stages_dir(), config, ports))

    def _register_kwok_nodes(self) -> None:
        api = self._core_api()
        for name, zone in nodes.KWOK_NODES.items():
            api.create_node(body=client.V1Node.model_validate(nodes.kwok_node(name, zone)))

    def _start_process_node(self, config: Path, ports: components.Ports) -> None:
        pki = self.layout.pki
        argv = [
            sys.executable,
            "-m",
            "processnode",
            f"--kubeconfig={config}",
            f"--node-name={nodes.PROCESS_NODE_NAME}",
            f"--zone={nodes.PROCESS_NODE_ZONE}",
            f"--state-dir={self.layout.process_node}",
            f"--path-prepend={os.pathsep.join(self.process_path)}",
            f"--kubelet-port={ports.process_node_logs}",
            f"--serving-cert={pki / 'process-node-serving.crt'}",
            f"--serving-key={pki / 'process-node-serving.key'}",
            f"--client-ca={pki / 'ca.crt'}",
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(E2E_DIR), env.get("PYTHONPATH", "")]))
        self._spawn("process-node", argv, env)

    def _core_api(self) -> Any:
        api_client = config.new_client_from_config(config_file=str(self.layout.kubeconfig))
        return client.CoreV1Api(api_client)

    def _wait_for_workloads_ready(self, timeout_s: float) -> None:
        """Nodes Ready and the ``default`` ServiceAccount created (i.e. the controllers work)."""
        api = self._core_api()
        expected = (
            {real_node.NODE_NAME} if self.with_real_node else {*nodes.KWOK_NODES, nodes.PROCESS_NODE_NAME}
        )

        def nodes_ready() -> bool:
            ready = {
                n.metadata.name
                for n in api.list_node().items
                if any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))
            }
            return expected <= ready

        def default_service_account() -> bool:
            names = {sa.metadata.name for sa in api.list_namespaced_service_account("default").items}
            return "default" in names

        processes.wait_until(nodes_ready, timeout_s, f"nodes {sorted(expected)} to be Ready")
        processes.wait_until(default_service_account, timeout_s, "the default ServiceAccount")
