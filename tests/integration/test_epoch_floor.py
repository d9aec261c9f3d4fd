"""Epochs resume above the store's after the operator's intent is lost (real executors, real API server).

An app is deleted and re-created on the same state store: its status — and the epochs in it — are gone,
so the new incarnation starts every task at epoch 1, while the store has seen higher epochs. Before the
fix the data plane was fenced by the store and silently only tailed. Now each executor reports the
store's epoch (`storeEpoch`, `fencedBy`), the operator announces the fenced tasks (Warning Event
TaskFenced) and gives their owners epochs above the store's, and processing resumes — exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators, app, reasons

from localcluster.waiting import wait_for
from realapps import app_on_process_node, committed_everything
from streamapp.api.names import APP_LABEL, APPS, GROUP, MEMBERS, VERSION
from streamapp.controller import intent
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Kind, Manifest
from streamapp.executor.state.replica import rebuild

PARTITIONS = 4
# Epochs a longer-lived app would have reached by moving its tasks around.
EARLIER_EPOCH = 5


def app_body(tmp_path: Path) -> dict[str, Any]:
    """Two real executors on the process node, all data under `tmp_path` (the shared store)."""
    return app_on_process_node(APP, tmp_path, PARTITIONS, replicas=2)


def gone(api: client.ApiClient, namespace: str) -> bool:
    """The app, its member pods and its StreamAppMembers are all deleted."""
    custom = client.CustomObjectsApi(api)
    apps = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, APPS)["items"]
    members = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)["items"]
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"{APP_LABEL}={APP}").items
    return not apps and not members and not pods


def fence_at(state: StateLayout, epoch: int) -> None:
    """Stand for the history a longer-lived app leaves: an owner at `epoch` fenced every partition."""
    for partition in range(PARTITIONS):
        head = rebuild(state, partition).head
        fence = Manifest(head.next_seq, epoch, Kind.FENCE, head.offset, head.offset, owner="earlier-app")
        manifests.create(state, partition, fence)


def test_a_re_created_app_resumes_above_the_store_epochs_exactly_once(
    api_client: client.ApiClient, namespace: str, operators: Operators, process_node: str, tmp_path: Path
) -> None:
    log = FileLog(tmp_path / "input")
    state = StateLayout(tmp_path / "state")
    custom = client.CustomObjectsApi(api_client)
    generate(log, GenerateSpec(partitions=PARTITIONS, count=3_000, keys=50, seed=1))
    operators.start()
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, app_body(tmp_path))
    wait_for(
        lambda: committed_everything(state, log, PARTITIONS),
        300,
        "the first incarnation processing all input",
    )

    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP)
    wait_for(lambda: gone(api_client, namespace), 180, "the app, its pods and its members deleted")
    fence_at(state, EARLIER_EPOCH)
    generate(log, GenerateSpec(partitions=PARTITIONS, count=3_000, keys=50, seed=2))
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, app_body(tmp_path))

    def resumed() -> dict[str, Any] | None:
        status = app(api_client, namespace).get("status") or {}
        epochs = [t.epoch for t in intent.decode(status["intent"]).tasks] if status.get("intent") else []
        conditions = {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}
        done = (
            len(epochs) == PARTITIONS
            and min(epochs) > EARLIER_EPOCH
            and conditions.get("Degraded", ("", ""))[0] == "False"
            and conditions.get("Ready", ("", ""))[0] == "True"
            and committed_everything(state, log, PARTITIONS)
        )
        return status if done else None

    # Ready turns True once every owner has reported processing its task under the new epoch: that
    # report can come a report interval after the commits that end the input, so it is waited for.
    wait_for(resumed, 300, "epochs above the store's, all new input committed and the app Ready")
    assert "TaskFenced" in reasons(api_client, namespace)
    for partition in range(PARTITIONS):
        epochs = [m.epoch for m in accepted_manifests(state, partition)]
        assert epochs == sorted(epochs) and epochs[-1] > EARLIER_EPOCH, f"partition {partition}: {epochs}"
        check_partition(state, tmp_path / "outputs", log, partition)
