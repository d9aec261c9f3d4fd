"""The real-node tier: a cluster of its own whose only node is a kubelet on containerd (``e2e/realnode``),
so pods run as containers of the built image, as users run them.

Its tests are marked ``node``. The cluster lives in ``<repo>/.cluster-node`` (or
``$STREAMAPP_NODE_CLUSTER_DIR``), beside the process-node cluster the integration tier uses, and is
stopped when the session ends. Off CI, a host that cannot run the node (not root, no runc) skips these
tests; under ``CI`` they fail instead (see the root conftest's ``unavailable``).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

import pytest
from kubernetes import client, config
from node_support import restricted_namespace

from imagebuild import podman
from localcluster.controlplane import REPO_ROOT, LocalCluster, default_root
from realnode import node

CHART = REPO_ROOT / "charts" / "streamapp-operator"


@pytest.fixture(scope="session")
def node_cluster(image: str, host_unavailable: Callable[[str], NoReturn]) -> Iterator[LocalCluster]:
    """The cluster with the real node up, the image (``streamapp:<version>``, podman's
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
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def node_api(node_cluster: LocalCluster) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(node_cluster.kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="session")
def operator_release(node_cluster: LocalCluster, node_api: client.ApiClient, helm: list[str]) -> str:
    """The chart installed as shipped (two replicas, leader election) in a restricted namespace, once
    per session."""
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
            "--wait",
            "--timeout",
            "300s",
        ],
        check=True,
        timeout=360,
    )
    return system
