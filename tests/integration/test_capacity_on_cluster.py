"""A heterogeneous app on the real cluster: tasks follow member capacity, output stays exactly once.

Three real executors on the process node, every pod requesting 500m of CPU, and member 2 declared at
one core by `executor.memberCapacity`: capacities 0.5, 0.5 and 1 give quotas of 3, 3 and 6 of 12
tasks. That split comes about only if the operator reads the CPU request off the pods (defaulting them
to one core would give 4, 4 and 4) and applies the override. The ownership is checked from outside,
by the reports of the processes running now, and the output against the reference count.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators, app

from chaos.observer import current_reports
from localcluster.waiting import wait_for
from realapps import app_on_process_node, committed_everything
from streamapp.api.names import APPS, GROUP, MEMBERS, VERSION, selector
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

PARTITIONS = 12
EXPECTED = {f"{APP}-0": 3, f"{APP}-1": 3, f"{APP}-2": 6}


def heterogeneous_app(root: Path) -> dict[str, Any]:
    """Every pod requests 500m; member 2 counts as one core."""
    body = app_on_process_node(APP, root, PARTITIONS, replicas=3, maxWarmupReplicas=PARTITIONS)
    executor = body["spec"]["executor"]
    executor["podTemplate"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    executor["memberCapacity"] = [{"member": 2, "cpu": "1"}]
    return body


def active_counts(api: client.ApiClient, namespace: str) -> Counter[str]:
    """Tasks per member, by the reports the processes running now wrote."""
    listed: dict[str, Any] = client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, VERSION, namespace, MEMBERS, label_selector=selector(APP)
    )
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector(APP)).items
    reports = current_reports(listed["items"], pods)
    return Counter({name: sum(t.get("role") == "active" for t in tasks) for name, tasks in reports.items()})


def settled(api: client.ApiClient, namespace: str) -> bool:
    status = app(api, namespace).get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    tasks = status.get("tasks") or {}
    return (
        conditions.get("Ready") == "True"
        and conditions.get("Rebalancing") == "False"
        and not tasks.get("warming")
        and not tasks.get("revoking")
        and active_counts(api, namespace) == Counter(EXPECTED)
    )


@pytest.mark.long
def test_a_member_of_twice_the_capacity_owns_twice_the_tasks_exactly_once(
    api_client: client.ApiClient, namespace: str, operators: Operators, process_node: str, tmp_path: Path
) -> None:
    log = FileLog(tmp_path / "input")
    state = StateLayout(tmp_path / "state")
    generate(log, GenerateSpec(partitions=PARTITIONS, count=3_000, keys=200, seed=1))
    operators.start()
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, heterogeneous_app(tmp_path)
    )
    wait_for(lambda: settled(api_client, namespace), 600, "tasks split 3/3/6 by capacity, app settled")
    pods = client.CoreV1Api(api_client).list_namespaced_pod(namespace, label_selector=selector(APP)).items
    assert {p.spec.containers[0].resources.requests["cpu"] for p in pods} == {"500m"}

    generate(log, GenerateSpec(partitions=PARTITIONS, count=3_000, keys=200, seed=2))
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 300, "the new input committed")
    assert active_counts(api_client, namespace) == Counter(EXPECTED)
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)
