"""Fixtures for tests against a real Kubernetes control plane.

The session uses the cluster named by ``STREAMAPP_KUBECONFIG`` (e.g. a kind cluster) or else starts the
local process-based cluster (``e2e/localcluster``), reusing one that ``make cluster-up`` left running.
A cluster this session started is stopped when the session ends. Every test under tests/integration is
marked ``integration``.

Fixtures other tests use: ``kubeconfig_path``, ``api_client`` (a ``kubernetes.client.ApiClient``),
``namespace`` (a fresh namespace per test, deleted afterwards), ``local_cluster`` (the
:class:`LocalCluster`, or None on an external cluster) and ``node_app`` (a counting app of real
executors on the process node, created and processed: ``nodeapp.start``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from faultproxy import FaultProxy
from kubernetes import client, config
from nodeapp import NodeApp, start
from operator_support import Operators, create_app

from kubesetup import create_namespace, install_crds
from localcluster.controlplane import LocalCluster
from localcluster.nodes import PROCESS_NODE_NAME

INTEGRATION_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test in this directory ``integration`` so ``-m "not integration"`` skips them."""
    for item in items:
        if INTEGRATION_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster | None]:
    """The local cluster, started for this session unless already running; None when external."""
    if os.environ.get("STREAMAPP_KUBECONFIG"):
        yield None
        return
    cluster = LocalCluster()
    started_here = not cluster.is_running()
    cluster.up()
    try:
        yield cluster
    finally:
        if started_here:
            cluster.down()


@pytest.fixture(scope="session")
def kubeconfig_path(local_cluster: LocalCluster | None) -> Path:
    """Admin kubeconfig of the cluster under test."""
    external = os.environ.get("STREAMAPP_KUBECONFIG")
    if external:
        return Path(external)
    assert local_cluster is not None
    return local_cluster.kubeconfig


@pytest.fixture(scope="session")
def api_client(kubeconfig_path: Path) -> Iterator[client.ApiClient]:
    """A ``kubernetes`` ApiClient with admin rights on the cluster under test."""
    api = config.new_client_from_config(config_file=str(kubeconfig_path))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def process_node(api_client: client.ApiClient) -> str:
    """Name of the process node; skips the test on clusters without one (e.g. kind)."""
    nodes = client.CoreV1Api(api_client).list_node(label_selector="streamapp.dev/node-kind=process").items
    if not nodes:
        pytest.skip("this cluster has no process node (only the local control plane runs one)")
    names = [n.metadata.name for n in nodes]
    return PROCESS_NODE_NAME if PROCESS_NODE_NAME in names else names[0]


@pytest.fixture
def namespace(api_client: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace whose ``default`` ServiceAccount exists (pods need it); deleted afterwards."""
    stem = "".join(ch if ch.isalnum() else "-" for ch in request.node.name.lower())[:40].strip("-")
    name = f"t-{stem}-{uuid.uuid4().hex[:6]}"
    try:
        create_namespace(api_client, name, {"streamapp.dev/test": "true"})
        yield name
    finally:
        client.CoreV1Api(api_client).delete_namespace(name)


@pytest.fixture(scope="session")
def crds(api_client: client.ApiClient) -> None:
    """The CRDs generated from the resource models, created or replaced, Established."""
    install_crds(api_client)


@pytest.fixture
def operators(kubeconfig_path: Path, namespace: str, tmp_path: Path, crds: None) -> Iterator[Operators]:
    """Start `streamapp operator` processes with `operators.start(identity, leader_election)`."""
    started = Operators(kubeconfig_path, namespace, tmp_path)
    yield started
    started.stop_all()


@pytest.fixture
def fault_proxy(kubeconfig_path: Path, tmp_path: Path, operators: Operators) -> Iterator[FaultProxy]:
    """A `FaultProxy` between the API server and the operators this test starts: they reach the API
    server only through it, so the test can hold, cut, delay or refuse their requests."""
    with FaultProxy(kubeconfig_path, tmp_path) as proxy:
        operators.kubeconfig = proxy.kubeconfig
        yield proxy


@pytest.fixture
def app_behind_proxy(
    api_client: client.ApiClient, namespace: str, operators: Operators, fault_proxy: FaultProxy
) -> FaultProxy:
    """The operator started behind `fault_proxy` and an app of 2 members and 4 partitions created
    (no executors): the proxy, for the test to disturb what the operator sends and receives."""
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=4)
    return fault_proxy


@pytest.fixture
def node_app(
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    process_node: str,
    local_cluster: LocalCluster | None,
    tmp_path: Path,
) -> Callable[..., NodeApp]:
    """`nodeapp.start` for this test: the counting app of real executors on the local process node,
    created and processed; for the tests that kill, stop or restart its executors there."""
    assert local_cluster is not None, "the executors are acted on through the local process node"
    del process_node  # required: skips the test on clusters without one
    return partial(start, api_client, namespace, operators, tmp_path, local_cluster.layout.process_node)


@pytest.fixture
def keda(local_cluster: LocalCluster | None, api_client: client.ApiClient, tmp_path: Path) -> Iterator[None]:
    """KEDA's operator and metrics adapter serving the external metrics API (built first if needed);
    only on the local cluster, whose API server this suite configures for the aggregation layer."""
    if local_cluster is None:
        pytest.skip("needs the local control plane, started with the aggregation layer configured")
    from kedatool import run

    with run.running(api_client, local_cluster.kubeconfig, tmp_path / "keda"):
        yield


@pytest.fixture(scope="session")
def prometheus() -> Path:
    """The Prometheus server binary (built from Go modules once, cached)."""
    from promtool import install

    install.ensure_server_installed()
    return install.server_binary()


@pytest.fixture(scope="session")
def s3_server(local_cluster: LocalCluster | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The real S3 test server, recorded in the cluster directory so `make cluster-down` stops it too
    if this session dies before stopping it."""
    from s3server import server

    state_dir = local_cluster.layout.root if local_cluster is not None else tmp_path_factory.mktemp("s3")
    started = server.start(state_dir)
    try:
        yield started
    finally:
        server.stop(state_dir)
