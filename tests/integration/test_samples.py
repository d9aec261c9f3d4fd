"""The shipped sample works as written: applied with kubectl, its claim binds, its input flows, real
executors process it, and the committed output is exactly once.

It is applied as the README tells a newcomer on the local cluster: through `e2e/local-install/sample/`,
whose only change is placement (real processes run only on the process node, so the input
generator's and the executors' pod specs get its selector and toleration).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import yaml
from dataplane_checks import check_partition
from kubernetes import client
from operator_support import Operators

from cluster_tools import claim_directory, kubectl
from localcluster.waiting import wait_for
from realapps import committed_everything
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout

LOCAL_SAMPLE = Path(__file__).resolve().parents[2] / "e2e" / "local-install" / "sample"
SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"


def processing_every_partition(state: StateLayout, partitions: int) -> bool:
    return all(any(m.end > 0 for m in accepted_manifests(state, p)) for p in range(partitions))


def test_streamapp_sample_processes_its_flowing_input_exactly_once(
    api_client: client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    operators: Operators,
    process_node: str,
) -> None:
    documents = list(yaml.safe_load_all(kubectl(kubeconfig_path, "kustomize", str(LOCAL_SAMPLE))))
    app = next(d for d in documents if d["kind"] == "StreamApp")
    partitions = int(app["spec"]["partitions"])
    operators.start()
    kubectl(kubeconfig_path, "apply", "-n", namespace, "-k", str(LOCAL_SAMPLE))

    data = wait_for(
        lambda: claim_directory(api_client, namespace, "counts-data"), 120, "the shared claim bound"
    )
    state, log = StateLayout(data / "state"), FileLog(data / "input")
    wait_for(lambda: processing_every_partition(state, partitions), 600, "every partition processed")

    # Stop the input (the generator finishes its chunk on SIGTERM), then let the executors drain it.
    client.AppsV1Api(api_client).patch_namespaced_deployment_scale(
        "counts-input", namespace, {"spec": {"replicas": 0}}
    )
    wait_for(
        lambda: (
            not client.CoreV1Api(api_client)
            .list_namespaced_pod(namespace, label_selector="app.kubernetes.io/name=counts-input")
            .items
        ),
        120,
        "the input generator stopped",
    )
    wait_for(lambda: committed_everything(state, log, partitions), 300, "all input committed")
    assert sum(log.end_offset(p) for p in range(partitions)) > 0
    for partition in range(partitions):
        check_partition(state, data / "output", log, partition)


SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"


def test_an_overlay_sets_the_samples_image_everywhere_and_its_pods_pass_restricted(
    api_client: client.ApiClient, kubeconfig_path: Path, namespace: str, tmp_path: Path
) -> None:
    """`images:` in an overlay rewrites the generator's and the executors' image (the StreamApp's field
    through the base's kustomizeconfig.yaml); the generator's pod passes the `restricted` Pod Security
    level on the real API server (a server-side dry run in a namespace that enforces it)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(SAMPLES, overlay)  # kustomize takes relative paths only
    overlay.joinpath("kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [base],
                "images": [
                    {"name": "streamapp", "newName": "registry.example.com/team/streamapp", "newTag": "9.9"}
                ],
            }
        )
    )
    documents = list(yaml.safe_load_all(kubectl(kubeconfig_path, "kustomize", str(overlay))))
    app = next(d for d in documents if d["kind"] == "StreamApp")
    generator = next(d for d in documents if d["kind"] == "Deployment")
    assert app["spec"]["executor"]["image"] == "registry.example.com/team/streamapp:9.9"
    assert (
        generator["spec"]["template"]["spec"]["containers"][0]["image"]
        == "registry.example.com/team/streamapp:9.9"
    )

    core = client.CoreV1Api(api_client)
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    core.patch_namespace(namespace, {"metadata": {"labels": labels}})
    pod = {"metadata": {"name": "counts-input-check"}, "spec": generator["spec"]["template"]["spec"]}
    core.create_namespaced_pod(namespace, pod, dry_run="All")  # refused with a 403 if it were not


def test_the_keda_samples_follow_the_namespace_their_kustomization_sets(
    kubeconfig_path: Path, tmp_path: Path
) -> None:
    """KEDA does not template its triggers: each sample's kustomization writes its namespace into the
    Prometheus query and the Kafka consumer group, as `kustomize edit set namespace` leaves it."""
    for sample, field, expected in (
        ("keda-prometheus", "query", 'namespace="team-a",app="counts"'),
        ("keda-kafka", "consumerGroup", "streamapp.team-a.clicks"),
    ):
        copy = tmp_path / sample
        shutil.copytree(SAMPLES / sample, copy)
        kustomization = yaml.safe_load((copy / "kustomization.yaml").read_text())
        (copy / "kustomization.yaml").write_text(yaml.safe_dump({**kustomization, "namespace": "team-a"}))
        (scaled,) = yaml.safe_load_all(kubectl(kubeconfig_path, "kustomize", str(copy)))
        assert scaled["metadata"]["namespace"] == "team-a"
        assert expected in scaled["spec"]["triggers"][0]["metadata"][field]
