"""The real-node tier on kind, for people with Docker (``make kind-test``, ``e2e/kind/node-tests.sh``).

The script builds the image with ``docker build``, creates a one-node kind cluster and loads the image
into it; this module is what the tier's fixtures need from that cluster once it runs:

- the kubeconfig the script wrote;
- containerd's ``ctr`` inside the node container (``docker exec``), to kill a container or tag an image
  the way the tests do on the local real node;
- volumes the tests can read where the pods write them: kind's own class (local-path) is
  ReadWriteOnce and lives inside the node, while the sample shares one ReadWriteMany claim between its
  members. So the tier runs the local cluster's hostPath provisioner on this machine, over a directory
  the script mounts at the same path in the node, as the cluster's default ``standard`` class.

The tier picks kind when ``STREAMAPP_NODE=kind``; the script sets that and the variables below.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, config

from localcluster import components, processes, provisioner
from realnode.images import CRI_NAMESPACE

SELECT_ENV = "STREAMAPP_NODE"
CLUSTER_ENV = "STREAMAPP_KIND_CLUSTER"
STATE_ENV = "STREAMAPP_KIND_DIR"


@dataclass(frozen=True)
class KindNode:
    """A one-node kind cluster named ``name`` whose files (kubeconfig, volumes) are under ``state``."""

    name: str
    state: Path

    @property
    def kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    @property
    def volumes(self) -> Path:
        """Mounted at this same path inside the node (see ``node-tests.sh``)."""
        return self.state / "volumes"

    @property
    def container(self) -> str:
        """kind names a cluster's only node ``<cluster>-control-plane``."""
        return f"{self.name}-control-plane"

    def ctr_argv(self, *args: str) -> list[str]:
        """``ctr`` in the node container, on containerd's default socket, in the kubelet's namespace."""
        return ["docker", "exec", self.container, "ctr", f"--namespace={CRI_NAMESPACE}", *args]

    def ctr(self, *args: str) -> None:
        subprocess.run(self.ctr_argv(*args), check=True, capture_output=True, text=True)


def selected() -> KindNode | None:
    """The kind cluster the script prepared, when the tier is told to use one; a half-set environment
    is an error, not a silent fall-back to the local node."""
    if os.environ.get(SELECT_ENV) != "kind":
        return None
    missing = [name for name in (CLUSTER_ENV, STATE_ENV) if not os.environ.get(name)]
    if missing:
        raise RuntimeError(f"{SELECT_ENV}=kind needs {', '.join(missing)} (run e2e/kind/node-tests.sh)")
    return KindNode(os.environ[CLUSTER_ENV], Path(os.environ[STATE_ENV]))


@contextmanager
def hostpath_storage(node: KindNode) -> Iterator[None]:
    """The provisioner running against the cluster, its class in place of kind's ``standard``."""
    node.volumes.mkdir(parents=True, exist_ok=True)
    port = processes.free_port()
    argv = components.provisioner(provisioner.binary_path(), node.kubeconfig, node.volumes, port)
    record = processes.spawn("provisioner", argv, node.state / "provisioner.log")
    try:
        processes.wait_until(
            lambda: processes.http_ok(f"http://127.0.0.1:{port}/metrics"), 60, "provisioner", record
        )
        with config.new_client_from_config(config_file=str(node.kubeconfig)) as api:
            storage = client.StorageV1Api(api)
            try:
                storage.delete_storage_class(provisioner.STORAGE_CLASS)
            except client.ApiException as error:
                if error.status != 404:
                    raise
            body = client.V1StorageClass.model_validate(provisioner.storage_class())
            storage.create_storage_class(body=body)
        yield
    finally:
        processes.stop(record)
