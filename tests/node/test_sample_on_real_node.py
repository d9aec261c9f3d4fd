"""The product as users run it, on a real kubelet: the operator installed by its chart, the shipped
sample applied as written, every pod a container of the built image in namespaces that enforce the
``restricted`` Pod Security level, and output exactly once through what happens to real containers:

- an executor container SIGKILLed mid-stream (the kubelet restarts it in place) — in ``make test``;
- an image change to a second tag, rolled over every member with the rollout's handoff, then a member
  pod deleted by hand and re-created on its claim, its local state still there — ``make test-node``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from kubernetes import client
from node_support import Node, pod, ready, restricted_namespace

from cluster_tools import claim_directory, kubectl
from localcluster.controlplane import REPO_ROOT
from localcluster.waiting import wait_for
from realapps import committed_everything
from realnode import images
from streamapp.api.names import APPS, GROUP, REVISION_LABEL, VERSION, member_name, state_claim_name
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import CHECKPOINT

pytestmark = pytest.mark.node

SAMPLE = REPO_ROOT / "manifests" / "samples" / "streamapp.yaml"
APP = "counts"
PARTITIONS = 12
REPLICAS = 3


@dataclass(frozen=True)
class Sample:
    """The sample running in its namespace: where its shared claim lives on this machine."""

    namespace: str
    data: Path

    @property
    def state(self) -> StateLayout:
        return StateLayout(self.data / "state")

    @property
    def log(self) -> FileLog:
        return FileLog(self.data / "input")


@pytest.fixture
def sample(
    node_cluster: Node,
    node_api: client.ApiClient,
    operator_release: str,
    request: pytest.FixtureRequest,
) -> Iterator[Sample]:
    """``kubectl apply -f manifests/samples/streamapp.yaml`` in a fresh restricted namespace, running
    until every partition has committed a batch; the namespace is deleted afterwards."""
    namespace = restricted_namespace(
        node_api, f"counts-{request.node.name[5:30].replace('_', '-').strip('-')}"
    )
    try:
        kubectl(node_cluster.kubeconfig, "apply", "-n", namespace, "-f", str(SAMPLE))
        data = wait_for(
            lambda: claim_directory(node_api, namespace, "counts-data"), 120, "the shared claim bound"
        )
        running = Sample(namespace, data)
        state = running.state
        wait_for(
            lambda: all(any(m.end > 0 for m in accepted_manifests(state, p)) for p in range(PARTITIONS)),
            600,
            "every partition processed",
        )
        yield running
    finally:
        client.CoreV1Api(node_api).delete_namespace(namespace)


def stop_input_and_check(api: client.ApiClient, running: Sample) -> None:
    """Stop the generator (it finishes its chunk on SIGTERM), let the executors drain, compare every
    partition's committed state and outputs with the reference computed from the input."""
    client.AppsV1Api(api).patch_namespaced_deployment_scale(
        "counts-input", running.namespace, {"spec": {"replicas": 0}}
    )
    wait_for(
        lambda: (
            not client.CoreV1Api(api)
            .list_namespaced_pod(running.namespace, label_selector="app.kubernetes.io/name=counts-input")
            .items
        ),
        120,
        "the input generator stopped",
    )
    state, log = running.state, running.log
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 300, "all input committed")
    assert sum(log.end_offset(p) for p in range(PARTITIONS)) > 0
    for partition in range(PARTITIONS):
        check_partition(state, running.data / "output", log, partition)


def test_a_killed_executor_container_restarts_in_place_and_output_stays_exactly_once(
    node_cluster: Node, node_api: client.ApiClient, sample: Sample
) -> None:
    name = member_name(APP, 1)
    victim = pod(node_api, sample.namespace, name)
    assert victim is not None
    (status,) = victim.status.container_statuses
    node_cluster.ctr(
        "tasks",
        "kill",
        "--signal",
        "SIGKILL",
        status.container_id.removeprefix("containerd://"),
    )

    def restarted() -> bool:
        found = pod(node_api, sample.namespace, name)
        return (
            found is not None
            and found.metadata.uid == victim.metadata.uid
            and found.status.container_statuses[0].restart_count > status.restart_count
            and ready(found)
        )

    wait_for(restarted, 300, "the killed executor restarted in its pod and ready")
    stop_input_and_check(node_api, sample)


def app_status(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    found = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP)
    return dict(found.get("status") or {})


@pytest.mark.long
def test_a_second_image_tag_rolls_every_member_and_a_deleted_pod_keeps_its_local_state(
    node_cluster: Node, node_api: client.ApiClient, sample: Sample, image: str
) -> None:
    namespace = sample.namespace
    # 1. The image under a second tag (what a CI pipeline pushes), then the app's image changed to it.
    rolled = f"{image.rsplit(':', 1)[0]}:rolled"
    node_cluster.ctr("images", "tag", "--force", images.normalized(image), images.normalized(rolled))
    before = {i: pod(node_api, namespace, member_name(APP, i)).metadata.uid for i in range(REPLICAS)}  # type: ignore[union-attr]
    old_revision = app_status(node_api, namespace)["updateRevision"]
    client.CustomObjectsApi(node_api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, APP, {"spec": {"executor": {"image": rolled}}}
    )

    def rolled_out() -> bool:
        status = app_status(node_api, namespace)
        progressing = {c["type"]: c for c in status.get("conditions") or []}.get("Progressing", {})
        pods = [pod(node_api, namespace, member_name(APP, i)) for i in range(REPLICAS)]
        return (
            all(p is not None and p.metadata.uid != before[i] and ready(p) for i, p in enumerate(pods))
            and all(p.spec.containers[0].image == rolled for p in pods)  # type: ignore[union-attr]
            and status.get("currentRevision") == status.get("updateRevision") != old_revision
            and progressing.get("reason") == "RolloutComplete"
        )

    wait_for(rolled_out, 900, "every member replaced from the second tag, the rollout complete")
    revision = app_status(node_api, namespace)["updateRevision"]
    for i in range(REPLICAS):
        assert pod(node_api, namespace, member_name(APP, i)).metadata.labels[REVISION_LABEL] == revision  # type: ignore[union-attr]
    events = client.CoreV1Api(node_api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={APP}"
    )
    assert "MemberLost" not in {e.reason for e in events.items}, "a member was lost holding tasks"

    # 2. A member pod deleted by hand: the operator re-creates it on the same claim, whose local state
    # (a checkpoint per task it held) is still there for it.
    name = member_name(APP, 0)
    local = claim_directory(node_api, namespace, state_claim_name(APP, 0))
    assert local is not None
    checkpoints = sorted(p.relative_to(local) for p in local.glob(f"p=*/{CHECKPOINT}"))
    assert checkpoints, "member 0 checkpointed the tasks it held"
    uid = pod(node_api, namespace, name).metadata.uid  # type: ignore[union-attr]
    client.CoreV1Api(node_api).delete_namespaced_pod(name, namespace)
    wait_for(
        lambda: (
            (found := pod(node_api, namespace, name)) is not None
            and found.metadata.uid != uid
            and ready(found)
        ),
        300,
        "member 0's pod re-created and ready",
    )
    assert claim_directory(node_api, namespace, state_claim_name(APP, 0)) == local, "the same volume"
    kept = sorted(p.relative_to(local) for p in local.glob(f"p=*/{CHECKPOINT}"))
    assert set(checkpoints) <= set(kept), "the local state survived the pod"

    stop_input_and_check(node_api, sample)
