"""A stuck Spark on real executors: two members' JVMs are stopped (SIGSTOP) at once, their pods stay
ready and their executors go on reporting; the operator replaces them after `batchTimeout`, one at a
time (`rollingUpdate.maxUnavailable: 1`), and the app's output stays exactly-once.

Judged from the outside: the pods' readiness sampled every half second never shows two of the three
members unavailable at once, both pods are new, the operator said `MemberStuck`, and every partition's
output equals a reference computed from the input. About five minutes (two Spark starts after the
timeout): in `make test-long`; `make test` has the simulator's `stuck-members` and the unit tests.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators, reasons
from test_member_local_state import pod_uid
from test_returning_member import app_status, pod_ready

from chaos.faults import executor_pid
from localcluster.controlplane import LocalCluster
from localcluster.waiting import wait_for
from realapps import app_on_process_node, committed_everything
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

PARTITIONS = 6
REPLICAS = 3
BATCH_TIMEOUT_SECONDS = 45


def jvms_under(pid: int) -> list[int]:
    """The java processes descended from `pid` (the executor's Spark driver JVM)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)], names[int(entry.name)] = int(fields[1]), name
    found = []
    for child, name in names.items():
        ancestor = parents.get(child)
        while ancestor not in (None, 0, 1):
            if ancestor == pid:
                if name == "java":
                    found.append(child)
                break
            ancestor = parents.get(ancestor)
    return found


def settled(api: client.ApiClient, namespace: str) -> bool:
    status = app_status(api, namespace)
    counts = status.get("tasks") or {}
    members = status.get("members") or []
    return (
        counts.get("active") == PARTITIONS
        and not counts.get("warming")
        and not counts.get("revoking")
        and sum(1 for m in members if m.get("active")) == REPLICAS
    )


@pytest.mark.long
def test_stopped_jvms_get_their_members_replaced_one_at_a_time(
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    process_node: str,
    local_cluster: LocalCluster | None,
    tmp_path: Path,
) -> None:
    assert local_cluster is not None, "the stop acts on the local process node's processes"
    log, state = FileLog(tmp_path / "input"), StateLayout(tmp_path / "state")
    generate(log, GenerateSpec(partitions=PARTITIONS, count=3_000, keys=1_000, seed=1))
    operators.start()
    body: dict[str, Any] = app_on_process_node(
        APP, tmp_path, PARTITIONS, replicas=REPLICAS, batchTimeout=f"{BATCH_TIMEOUT_SECONDS}s"
    )
    body["spec"]["executor"]["storage"] = {"size": "1Gi"}
    body["spec"]["rollingUpdate"] = {"maxUnavailable": 1}
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 400, "every partition processed")
    wait_for(lambda: settled(api_client, namespace), 300, "every member processing, nothing moving")

    before = {m: pod_uid(api_client, namespace, m) for m in (1, 2)}
    for member in (1, 2):
        found = executor_pid(local_cluster.layout.process_node, str(before[member]))
        assert found is not None
        jvms = jvms_under(found[0])
        assert jvms, f"member {member}'s executor runs no JVM"
        for jvm in jvms:
            os.kill(jvm, signal.SIGSTOP)
    stopped_at = time.time()
    generate(log, GenerateSpec(partitions=PARTITIONS, count=1_000, keys=1_000, seed=2))

    def replaced() -> bool:
        unavailable = sum(1 for m in range(REPLICAS) if not pod_ready(api_client, namespace, m))
        assert unavailable <= 1, f"{unavailable} members unavailable at once"
        return all(
            pod_ready(api_client, namespace, m) and pod_uid(api_client, namespace, m) != before[m]
            for m in (1, 2)
        )

    wait_for(replaced, 600, "both stuck members replaced and ready", interval_s=0.5)
    assert time.time() - stopped_at >= BATCH_TIMEOUT_SECONDS
    assert reasons(api_client, namespace).count("MemberStuck") >= 1
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 400, "all input committed")
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)
