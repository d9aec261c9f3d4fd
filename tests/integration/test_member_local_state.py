"""A member's local state survives its restarts, measured from the outside on real executors.

With a claim (`executor.storage.size`), a member whose executor is SIGKILLed, or whose pod is deleted
and re-created within the delay, resumes from its checkpoint: the rows it then restores while blocking
are exactly the rows committed after that checkpoint (read from its volume and the shared store), not
its state. Without a claim, a re-created pod has a new emptyDir and restores each task in full. Output
stays exactly-once throughout.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from nodeapp import NodeApp, pod_uid
from operator_support import APP, app

from localcluster.waiting import wait_for
from processnode import procfs
from realapps import committed_everything
from streamapp.api.names import (
    GROUP,
    MEMBERS,
    RESTART_ANNOTATION,
    VERSION,
    member_name,
    state_claim_name,
)
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state import changelog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import CHECKPOINT, Checkpoint

PARTITIONS = 4
KEYS = 20_000


def rows_after(state: StateLayout, partition: int, seq: int) -> int:
    """Rows in the segments committed after `seq`: what a resume from a checkpoint at `seq` replays."""
    return sum(
        changelog.read_table(state, name).num_rows
        for found in accepted_manifests(state, partition)
        if found.seq > seq
        for name in found.segments
    )


def member_status(api: client.ApiClient, namespace: str, member: int) -> dict[str, Any]:
    found = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, MEMBERS, member_name(APP, member)
    )
    return dict(found.get("status") or {})


def active_reports(api: client.ApiClient, namespace: str, member: int, since: datetime) -> dict[int, Any]:
    """The member's active task reports, if it has reported since `since` (else empty)."""
    status = member_status(api, namespace, member)
    at = status.get("reportedAt")
    if not at or datetime.fromisoformat(at.replace("Z", "+00:00")) <= since:
        return {}
    return {t["task"]: t for t in status.get("tasks") or [] if t["role"] == "active"}


def claim_directory(api: client.ApiClient, namespace: str, member: int) -> Path:
    core = client.CoreV1Api(api)
    claim = core.read_namespaced_persistent_volume_claim(state_claim_name(APP, member), namespace)
    volume = core.read_persistent_volume(claim.spec.volume_name)
    return Path(volume.spec.host_path.path)


def checkpoints(local: Path, tasks: set[int]) -> dict[int, Checkpoint]:
    return {p: Checkpoint.parse((local / f"p={p}" / CHECKPOINT).read_bytes()) for p in tasks}


def restart_in_place(api: client.ApiClient, namespace: str, member: int) -> None:
    """Delete the member's pod as the operator does for a restart in place: marked first, so its tasks
    wait for the new pod. (A pod deleted without the mark is drained instead, its tasks handed to
    the other members: tests/integration/test_eviction_handoff.py.)"""
    core = client.CoreV1Api(api)
    name = member_name(APP, member)
    core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": {RESTART_ANNOTATION: "true"}}})
    core.delete_namespaced_pod(name, namespace)


def start_app(node_app: Callable[..., NodeApp], replicas: int, claim: bool) -> NodeApp:
    """The app created and processed, every member owning tasks and none moving."""
    # The tasks wait for their member (`delay`): what is measured is what its local state saves it.
    app = node_app(
        partitions=PARTITIONS,
        replicas=replicas,
        count=12_000,
        keys=KEYS,
        claim=claim,
        scheduledRebalanceMaxDelay="10m",
        lostTaskRecovery="delay",
    )
    wait_for(lambda: settled(app.api, app.namespace, replicas), 400, "every member owning tasks, none moving")
    return app


def settled(api: client.ApiClient, namespace: str, replicas: int) -> bool:
    """Every member reports active tasks and none is warming or being revoked: the tasks member 1
    holds now stay its own. The input alone can be committed before then, by the member that was
    ready first."""
    tasks = (app(api, namespace).get("status") or {}).get("tasks") or {}
    try:
        owners = [
            active_reports(api, namespace, member, datetime.min.replace(tzinfo=UTC))
            for member in range(replicas)
        ]
    except client.ApiException as error:
        if error.status == 404:  # a member not created yet
            return False
        raise
    return (
        all(owners) and not tasks.get("warming") and not tasks.get("revoking") and not tasks.get("unassigned")
    )


def resume_and_check(
    api: client.ApiClient, namespace: str, log: FileLog, state: StateLayout, since: datetime, seed: int
) -> dict[int, Any]:
    """More input; wait until member 1 (restarted after `since`) has processed it; its reports."""
    generate(log, GenerateSpec(partitions=PARTITIONS, count=2_000, keys=KEYS, seed=seed))
    reports: dict[int, Any] = {}

    def caught_up() -> bool:
        # A report can predate the commits by a report interval: wait for one that covers them.
        reports.update(active_reports(api, namespace, 1, since))
        return (
            bool(reports)
            and committed_everything(state, log, PARTITIONS)
            and all(report["appliedOffset"] == log.end_offset(task) for task, report in reports.items())
        )

    wait_for(caught_up, 400, "member 1 back and all input committed")
    return reports


def test_a_member_with_its_claim_replays_only_the_delta(
    api_client: client.ApiClient, namespace: str, node_app: Callable[..., NodeApp]
) -> None:
    app = start_app(node_app, replicas=2, claim=True)
    log, state = app.log, app.state
    local = claim_directory(api_client, namespace, 1)
    held = set(active_reports(api_client, namespace, 1, datetime.min.replace(tzinfo=UTC)))
    assert held, "member 1 owns tasks"

    # 1. The pod is restarted in place (a bounce within the delay); it checkpoints on SIGTERM.
    uid = pod_uid(api_client, namespace, 1)
    restart_in_place(api_client, namespace, 1)
    wait_for(lambda: pod_uid(api_client, namespace, 1) not in (None, uid), 120, "member 1's new pod")
    deleted_at = datetime.now(UTC)
    # What the new pod will replay: every batch committed after its checkpoint (none: nobody processes
    # a held task while its member is away).
    at_stop = checkpoints(local, held)
    deltas = {task: rows_after(state, task, at_stop[task].head.seq) for task in held}
    reports = resume_and_check(api_client, namespace, log, state, deleted_at, seed=2)
    for task in held:
        assert reports[task]["restoredBlocking"] == deltas[task] == 0, (task, reports[task], deltas[task])

    # 2. A few more batches, then the executor process dies (SIGKILL: no checkpoint at exit) and the
    # kubelet restarts it in place: it replays the batches committed since its last checkpoint.
    for seed in (3, 4, 5):
        app.more_input(800, KEYS, seed=seed)
        wait_for(app.processed, 300, "the batch committed")
    pid = app.executor(1)
    killed_at = datetime.now(UTC)
    procfs.signal_group(pid, signal.SIGKILL)
    at_kill = checkpoints(local, held)
    deltas = {task: rows_after(state, task, at_kill[task].head.seq) for task in held}
    reports = resume_and_check(api_client, namespace, log, state, killed_at, seed=6)
    for task in held:
        assert reports[task]["restoredBlocking"] == deltas[task], (task, reports[task], deltas[task])
    assert any(deltas.values()), "the kill came after batches no checkpoint covered"
    for task, delta in deltas.items():
        state_keys = len(set(log.read_arrow(task).column("key").to_pylist()))
        assert delta < state_keys / 2, ("the delta, not the state", task, delta, state_keys)
    app.check_output()


# make test-long: a minute or more of make test's cold budget; make test keeps the claim's delta replay
# above, and the executor's full restore is unit-tested (tests/executor).
@pytest.mark.long
def test_a_member_without_a_claim_restores_in_full(
    api_client: client.ApiClient, namespace: str, node_app: Callable[..., NodeApp]
) -> None:
    app = start_app(node_app, replicas=2, claim=False)
    log, state = app.log, app.state
    held = set(active_reports(api_client, namespace, 1, datetime.min.replace(tzinfo=UTC)))
    # The keys of each task's state when its member goes: all of them must come back from the store.
    keys = {task: len(set(log.read_arrow(task).column("key").to_pylist())) for task in held}
    uid = pod_uid(api_client, namespace, 1)
    restart_in_place(api_client, namespace, 1)
    wait_for(lambda: pod_uid(api_client, namespace, 1) not in (None, uid), 120, "member 1's new pod")
    reports = resume_and_check(api_client, namespace, log, state, datetime.now(UTC), seed=2)
    for task in held:
        assert reports[task]["restoredBlocking"] >= keys[task], ("a full restore", task, reports[task])
    app.check_output()
