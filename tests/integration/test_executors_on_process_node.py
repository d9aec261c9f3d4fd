"""Real executors under the operator: PySpark processes on the process node, scaled out mid-stream.

The operator places member pods on the process node, where each runs `streamapp executor
--from-cluster` for real: the membership client follows the member's target and the PySpark runtime
processes, warms up and hands over. After a scale-out under load the committed state and outputs of
every partition must equal a reference computed straight from the input: nothing lost, nothing twice.
"""

from __future__ import annotations

from pathlib import Path

from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators, app, reasons, scale

from localcluster.waiting import wait_for
from realapps import app_on_process_node, committed_everything
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

PARTITIONS = 4


def test_scale_out_of_real_executors_keeps_output_exactly_once(
    api_client: client.ApiClient, namespace: str, operators: Operators, process_node: str, tmp_path: Path
) -> None:
    log = FileLog(tmp_path / "input")
    state = StateLayout(tmp_path / "state")
    generate(log, GenerateSpec(partitions=PARTITIONS, count=4_000, keys=50, seed=1))
    operators.start()
    body = app_on_process_node(APP, tmp_path, PARTITIONS, replicas=1, maxWarmupReplicas=PARTITIONS)
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 300, "member 0 processing all input")

    scale(api_client, namespace, 2)
    generate(log, GenerateSpec(partitions=PARTITIONS, count=4_000, keys=50, seed=2))

    def settled() -> bool:
        status = app(api_client, namespace).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        members = {m["id"]: m["active"] for m in status.get("members") or []}
        return (
            members == {0: 2, 1: 2}
            and conditions.get("Rebalancing") == "False"
            and committed_everything(state, log, PARTITIONS)
        )

    wait_for(settled, 300, "two members sharing the partitions with all input committed")
    assert "WarmupPromoted" in reasons(api_client, namespace)
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)
