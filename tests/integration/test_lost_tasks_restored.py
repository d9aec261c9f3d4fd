"""`lostTaskRecovery: auto` on real executors: a killed member's tasks are restored elsewhere when that
is quicker than waiting for it, measured from the outside.

The app's state is small (a restore takes a second or so) and its members count as ready only once Spark
has started (the operator's own `/readyz` probe), so a SIGKILLed executor is away for a Spark start,
tens of seconds. Its tasks are restored on the other member and commit there again long before it is
back: each task stands still for about a restore, not a restart. The operator's Events say why; output
stays exactly-once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators, reasons
from test_member_local_state import pod_uid
from test_returning_member import PARTITIONS, pod_ready, settled

from chaos.faults import executor_pid
from localcluster.controlplane import LocalCluster
from localcluster.waiting import wait_for
from processnode import procfs
from realapps import app_on_process_node, committed_everything
from streamapp.api.names import APPS, GROUP, VERSION, member_name
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout


def last_batch(state: StateLayout, partition: int) -> tuple[str, float]:
    """Who committed the partition's newest batch, and when (its manifest's commit time)."""
    batches = [m for m in accepted_manifests(state, partition) if m.segments and m.committed_at]
    newest = batches[-1]
    assert newest.committed_at is not None
    return newest.owner, newest.committed_at


def test_a_killed_members_tasks_are_restored_elsewhere_before_it_is_back(
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    process_node: str,
    local_cluster: LocalCluster | None,
    tmp_path: Path,
) -> None:
    assert local_cluster is not None, "the kill acts on the local process node"
    log, state = FileLog(tmp_path / "input"), StateLayout(tmp_path / "state")
    generate(log, GenerateSpec(partitions=PARTITIONS, count=4_000, keys=2_000, seed=1))
    operators.start()
    body: dict[str, Any] = app_on_process_node(
        APP, tmp_path, PARTITIONS, replicas=2, scheduledRebalanceMaxDelay="5m"
    )
    body["spec"]["executor"]["storage"] = {"size": "1Gi"}
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 400, "every partition processed")
    wait_for(lambda: settled(api_client, namespace), 300, "every task active, nothing warming")
    # Input that arrives once the split is settled, so each task's newest batch names its current owner
    # (the first input may all be committed by member 0 before member 1 is handed its tasks).
    generate(log, GenerateSpec(partitions=PARTITIONS, count=500, keys=2_000, seed=4))
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 400, "the settled split committing")
    held = [p for p in range(PARTITIONS) if last_batch(state, p)[0] == member_name(APP, 1)]
    assert held, "member 1 owns tasks"

    found = executor_pid(local_cluster.layout.process_node, str(pod_uid(api_client, namespace, 1)))
    assert found is not None
    procfs.signal_group(found[0], signal.SIGKILL)
    killed_at = time.time()
    generate(log, GenerateSpec(partitions=PARTITIONS, count=1_000, keys=2_000, seed=2))

    def taken_over() -> bool:
        return all(last_batch(state, p)[0] == member_name(APP, 0) for p in held)

    wait_for(taken_over, 240, "member 1's tasks committing on member 0")
    over_at = max(last_batch(state, p)[1] for p in held)
    back = pod_ready(api_client, namespace, 1)
    wait_for(lambda: pod_ready(api_client, namespace, 1), 300, "member 1 back")
    back_at = time.time()
    assert not back, "member 1 was back before its tasks moved: nothing was tested"
    assert over_at < back_at, (over_at - killed_at, back_at - killed_at)
    said = [r for r in reasons(api_client, namespace) if r in ("RestoringElsewhere", "RestoredElsewhere")]
    assert said, "no Event said the tasks were restored elsewhere"

    wait_for(lambda: committed_everything(state, log, PARTITIONS), 400, "all input committed")
    wait_for(lambda: settled(api_client, namespace), 300, "balanced again")
    generate(log, GenerateSpec(partitions=PARTITIONS, count=1_000, keys=2_000, seed=3))
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 400, "all input committed again")
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)
