"""Dynamic provisioning on the local cluster, claims on the process node, and `kubectl logs` there.

The local cluster's hostpath provisioner gives each claim a directory under `<cluster>/volumes`; the
process node maps a claim's mountPath onto that directory. Every pod here runs on one machine, so a
ReadWriteMany claim is really shared. The pods run small Python programs that learn their directory
from an env var (the process node rewrites env values under a mountPath, not paths inside a script).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from localcluster import build
from localcluster.controlplane import LocalCluster
from localcluster.nodes import process_node_selector, process_node_tolerations
from localcluster.provisioner import STORAGE_CLASS
from localcluster.waiting import wait_for

MOUNT = "/var/lib/shared"
BIND_TIMEOUT_S = 60.0
POD_TIMEOUT_S = 90.0
# Writes <DIR>/<NAME>.txt, then waits (bounded) until every file named in WAIT_FOR exists there.
WRITE_AND_WAIT = """
import os, pathlib, sys, time
directory = pathlib.Path(os.environ["DIR"])
directory.mkdir(parents=True, exist_ok=True)
(directory / (os.environ["NAME"] + ".txt")).write_text(os.environ["NAME"])
print("wrote", os.environ["NAME"], flush=True)
deadline = time.monotonic() + 60
while not all((directory / f"{other}.txt").exists() for other in os.environ.get("WAIT_FOR", "").split()):
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.1)
"""


@pytest.fixture
def volumes_dir(local_cluster: LocalCluster | None) -> Path:
    """Where the local cluster's provisioner creates volumes; other clusters keep them out of reach."""
    if local_cluster is None:
        pytest.skip("volume directories are only visible on the local cluster")
    return local_cluster.layout.volumes


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def claim(core: client.CoreV1Api, namespace: str, name: str, mode: str = "ReadWriteOnce") -> None:
    """A claim without storageClassName: the default class must take it."""
    body = {
        "metadata": {"name": name},
        "spec": {"accessModes": [mode], "resources": {"requests": {"storage": "1Gi"}}},
    }
    core.create_namespaced_persistent_volume_claim(
        namespace, client.V1PersistentVolumeClaim.model_validate(body)
    )


def bound_volume(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    """The PV the claim is bound to, once it is."""

    def bound() -> Any:
        current: Any = core.read_namespaced_persistent_volume_claim(name, namespace)
        return current.spec.volume_name if current.status.phase == "Bound" else None

    return core.read_persistent_volume(wait_for(bound, BIND_TIMEOUT_S, f"claim {name} Bound"))


def process_pod(name: str, env: dict[str, str], claims: dict[str, str], node: str = "") -> dict[str, Any]:
    """A pod on the process node running WRITE_AND_WAIT, each claim mounted at MOUNT/<claim>."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "tolerations": process_node_tolerations(),
        "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims.values()],
        "containers": [
            {
                "name": "main",
                "image": "unused",
                "command": [sys.executable, "-c", WRITE_AND_WAIT],
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "volumeMounts": [{"name": c, "mountPath": path} for path, c in claims.items()],
            }
        ],
    }
    if node:
        spec["nodeName"] = node  # bypasses the scheduler, which would hold the pod for its claim
    else:
        spec["nodeSelector"] = process_node_selector()
    return {"metadata": {"name": name}, "spec": spec}


def create_pod(core: client.CoreV1Api, namespace: str, body: dict[str, Any]) -> None:
    core.create_namespaced_pod(namespace, client.V1Pod.model_validate(body))


def phase(core: client.CoreV1Api, namespace: str, name: str) -> str:
    pod: Any = core.read_namespaced_pod(name, namespace)
    return str(pod.status.phase)


def succeeded(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """Wait for the pod to succeed; fail at once (with its log) if it fails."""

    def done() -> bool:
        current = phase(core, namespace, name)
        if current == "Failed":
            pytest.fail(f"pod {name} failed: {core.read_namespaced_pod_log(name, namespace)}")
        return current == "Succeeded"

    wait_for(done, POD_TIMEOUT_S, f"pod {name} Succeeded")


def test_claim_binds_through_the_default_class(
    core: client.CoreV1Api, namespace: str, volumes_dir: Path
) -> None:
    classes: list[Any] = client.StorageV1Api(core.api_client).list_storage_class().items
    defaults = [
        c.metadata.name
        for c in classes
        if (c.metadata.annotations or {}).get("storageclass.kubernetes.io/is-default-class") == "true"
    ]
    assert defaults == [STORAGE_CLASS]
    claim(core, namespace, "data")
    pv = bound_volume(core, namespace, "data")
    assert pv.spec.storage_class_name == STORAGE_CLASS
    assert pv.spec.persistent_volume_reclaim_policy == "Delete"
    assert pv.spec.capacity == {"storage": "1Gi"}
    assert Path(pv.spec.host_path.path) == volumes_dir / pv.metadata.name
    assert (volumes_dir / pv.metadata.name).is_dir()


def test_process_node_pod_writes_into_its_claim(
    core: client.CoreV1Api, namespace: str, process_node: str, volumes_dir: Path
) -> None:
    claim(core, namespace, "state")
    pv = bound_volume(core, namespace, "state")
    env = {"DIR": f"{MOUNT}/sub", "NAME": "member-0"}
    create_pod(core, namespace, process_pod("writer", env, {MOUNT: "state"}))
    succeeded(core, namespace, "writer")
    assert (volumes_dir / pv.metadata.name / "sub" / "member-0.txt").read_text() == "member-0"


def test_pods_sharing_a_read_write_many_claim_see_each_others_files(
    core: client.CoreV1Api, namespace: str, process_node: str, volumes_dir: Path
) -> None:
    claim(core, namespace, "shared", mode="ReadWriteMany")
    pv = bound_volume(core, namespace, "shared")
    assert pv.spec.access_modes == ["ReadWriteMany"]
    for me, other in (("a", "b"), ("b", "a")):
        env = {"DIR": MOUNT, "NAME": me, "WAIT_FOR": other}
        create_pod(core, namespace, process_pod(f"pod-{me}", env, {MOUNT: "shared"}))
    for me in ("a", "b"):
        succeeded(core, namespace, f"pod-{me}")  # each exits 0 only once it saw the other's file
    assert sorted(p.name for p in (volumes_dir / pv.metadata.name).iterdir()) == ["a.txt", "b.txt"]


def test_pod_waits_for_its_claim_to_be_bound(
    core: client.CoreV1Api, namespace: str, process_node: str
) -> None:
    env = {"DIR": MOUNT, "NAME": "late"}
    create_pod(core, namespace, process_pod("waiter", env, {MOUNT: "later"}, node=process_node))
    wait_for(lambda: phase(core, namespace, "waiter") == "Pending", 10, "the pod to be seen Pending")
    with pytest.raises(AssertionError, match="timed out"):
        wait_for(lambda: phase(core, namespace, "waiter") != "Pending", 3, "the pod to leave Pending")
    waiter: Any = core.read_namespaced_pod("waiter", namespace)
    assert not waiter.status.container_statuses
    claim(core, namespace, "later")
    succeeded(core, namespace, "waiter")


def test_deleting_the_claim_removes_the_volume_directory(
    core: client.CoreV1Api, namespace: str, volumes_dir: Path
) -> None:
    claim(core, namespace, "scratch")
    pv = bound_volume(core, namespace, "scratch")
    directory = volumes_dir / pv.metadata.name
    (directory / "leftover.txt").write_text("gone with the claim")
    core.delete_namespaced_persistent_volume_claim("scratch", namespace)

    def volume_gone() -> bool:
        try:
            core.read_persistent_volume(pv.metadata.name)
        except ApiException as error:
            return bool(error.status == 404)
        return False

    wait_for(volume_gone, BIND_TIMEOUT_S, f"PV {pv.metadata.name} deleted")
    assert not directory.exists()


def test_kubectl_logs_shows_a_process_node_pods_output(
    core: client.CoreV1Api, namespace: str, process_node: str, kubeconfig_path: Path
) -> None:
    body = process_pod("talker", {}, {})
    body["spec"]["containers"][0]["command"] = [
        sys.executable,
        "-c",
        "import time; print('hello from the process node', flush=True); time.sleep(300)",
    ]
    create_pod(core, namespace, body)
    wait_for(lambda: phase(core, namespace, "talker") == "Running", POD_TIMEOUT_S, "talker Running")
    kubectl = build.bin_dir() / "kubectl"

    def logs() -> str:
        args = [str(kubectl), f"--kubeconfig={kubeconfig_path}", "-n", namespace, "logs", "talker"]
        result = subprocess.run(args, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert wait_for(logs, 30, "kubectl logs output") == "hello from the process node\n"
