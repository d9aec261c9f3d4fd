"""`lostTaskRecovery: delay`: a member whose executor restarts is waited for without copies of its tasks
warming elsewhere.

Measured from the outside on real executors. The app's delay is short (12 s), and its members count as
ready only once Spark has started (the operator's own `/readyz` probe), so a SIGKILLed executor stays away past half the delay: the point from which the tasks of a
member that is simply gone are pre-warmed on the others. Its pod shows its container restarting, so
the operator starts no copy of those tasks until the deadline and shows the member as Restarting;
output stays exactly-once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators
from test_member_local_state import pod_uid

from chaos.faults import executor_pid
from localcluster.controlplane import LocalCluster
from localcluster.waiting import wait_for
from processnode import procfs
from realapps import app_on_process_node, committed_everything
from streamapp.api.names import APPS, GROUP, VERSION, member_name
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

PARTITIONS = 4
DELAY_SECONDS = 12.0
POLL_SECONDS = 0.2


def app_status(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    app = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP)
    return dict(app.get("status") or {})


def task_counts(api: client.ApiClient, namespace: str) -> dict[str, int]:
    return dict(app_status(api, namespace).get("tasks") or {})


def pod_ready(api: client.ApiClient, namespace: str, member: int) -> bool:
    try:
        pod = client.CoreV1Api(api).read_namespaced_pod(member_name(APP, member), namespace)
    except client.ApiException as error:
        if error.status == 404:
            return False
        raise
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def settled(api: client.ApiClient, namespace: str) -> bool:
    """Every task active, none moving, and both members processing some: before the second member is
    ready, the first owns every task and nothing is warming yet."""
    status = app_status(api, namespace)
    counts = status.get("tasks") or {}
    members = status.get("members") or []
    return (
        counts.get("active") == PARTITIONS
        and not counts.get("warming")
        and not counts.get("revoking")
        and len(members) == 2
        and all(member.get("active") for member in members)
    )


# make test-long: `delay` is not the default; make test keeps its rule as a property
# (tests/rebalance/test_invariants.py: no pre-warm while the member is visibly returning).
@pytest.mark.long
def test_a_restarting_member_gets_no_prewarmed_copies(
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
        APP,
        tmp_path,
        PARTITIONS,
        replicas=2,
        scheduledRebalanceMaxDelay=f"{DELAY_SECONDS:g}s",
        lostTaskRecovery="delay",
    )
    body["spec"]["executor"]["storage"] = {"size": "1Gi"}
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 400, "every partition processed")
    wait_for(lambda: settled(api_client, namespace), 300, "every task active, nothing warming")

    found = executor_pid(local_cluster.layout.process_node, str(pod_uid(api_client, namespace, 1)))
    assert found is not None
    procfs.signal_group(found[0], signal.SIGKILL)
    wait_for(lambda: task_counts(api_client, namespace).get("reserved", 0) > 0, 60, "member 1 lost")
    lost_at = time.monotonic()

    # From just past half the delay to just before the deadline, while member 1 is still away.
    warming: list[int] = []
    phases: set[str] = set()
    while time.monotonic() < lost_at + DELAY_SECONDS - 1 and not pod_ready(api_client, namespace, 1):
        status = app_status(api_client, namespace)
        counts = status.get("tasks") or {}
        if time.monotonic() > lost_at + DELAY_SECONDS / 2 + 1:
            assert counts.get("reserved", 0) > 0, f"member 1's tasks released before the deadline: {counts}"
            warming.append(counts.get("warming", 0))
            phases |= {m["phase"] for m in status.get("members") or [] if m["id"] == 1}
        time.sleep(POLL_SECONDS)
    assert len(warming) >= 5, "member 1 was back before the pre-warm point: nothing was tested"
    assert not any(warming), f"copies warmed for a member whose pod was restarting: {warming}"
    assert phases == {"Restarting"}, f"member 1 shown as {phases} while its pod restarted"

    generate(log, GenerateSpec(partitions=PARTITIONS, count=1_000, keys=2_000, seed=2))
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 400, "all input committed again")
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)
