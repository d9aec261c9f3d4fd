"""The real-node tier: a cluster of its own whose only node is a kubelet on containerd (``e2e/realnode``),
so pods run as containers of the built image, as users run them.

Its tests are marked ``node``. The cluster lives in ``<repo>/.cluster-node`` (or
``$STREAMAPP_NODE_CLUSTER_DIR``), beside the process-node cluster the integration tier uses, and is
stopped when the session ends. Off CI, a host that cannot run the node (not root, no runc) skips these
tests; under ``CI`` they fail instead (see the root conftest's ``unavailable``).

With ``STREAMAPP_NODE=kind`` (``make kind-test``) the same tests run on a one-node kind cluster that
``e2e/kind/node-tests.sh`` created and loaded the image into (:mod:`kindnode`).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

import pytest
from kubernetes import client, config
from node_support import LocalNode, Node, restricted_namespace

import kindnode
from imagebuild import podman
from localcluster.controlplane import REPO_ROOT, LocalCluster, default_root
from realnode import node

CHART = REPO_ROOT / "charts" / "streamapp-operator"


@pytest.fixture(scope="session")
def node_cluster(image: str, host_unavailable: Callable[[str], NoReturn]) -> Iterator[Node]:
    """The cluster with a real node up and the image on it: kind's when selected, else this machine's."""
    kind = kindnode.selected()
    if kind is not None:
        with kindnode.hostpath_storage(kind):
            yield kind
    else:
        yield from local_node(image, host_unavailable)


def local_node(image: str, host_unavailable: Callable[[str], NoReturn]) -> Iterator[Node]:
    """The local cluster with the real node up, the image (``streamapp:<version>``, podman's
    ``localhost/streamapp:<version>``) imported under both names."""
    missing = node.requirements_missing()
    if missing:
        host_unavailable(f"the real node needs {', '.join(missing)}")
    cluster = LocalCluster(default_root(real_node=True), with_real_node=True)
    cluster.up()
    try:
        started = time.monotonic()
        node.load_image(cluster.layout.real_node, podman.command(), f"localhost/{image}", also_as=(image,))
        print(f"image {image} imported into the node in {time.monotonic() - started:.0f}s", flush=True)
        yield LocalNode(cluster)
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def node_api(node_cluster: Node) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(node_cluster.kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def operator_release(node_cluster: Node, node_api: client.ApiClient, helm: list[str]) -> str:
    """The chart installed as shipped (two replicas, leader election) in a restricted namespace, once
    per session; with Spark executors allowed (`sparkExecutors.allowed`), so the Spark-on-Kubernetes
    test runs under the member-pods policy that comes with it."""
    system = restricted_namespace(node_api, "streamapp-system")
    subprocess.run(
        [
            *helm,
            "--kubeconfig",
            str(node_cluster.kubeconfig),
            "install",
            "streamapp-operator",
            str(CHART),
            "-n",
            system,
            "--set",
            "sparkExecutors.allowed=true",
            "--wait",
            "--timeout",
            "300s",
        ],
        check=True,
        timeout=360,
    )
    return system
