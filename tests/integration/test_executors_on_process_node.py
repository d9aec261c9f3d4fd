"""Real executors under the operator: PySpark processes on the process node, scaled out mid-stream.

The operator places member pods on the process node, where each runs `streamapp executor
--from-cluster` for real: the membership client follows the member's target and the PySpark runtime
processes, warms up and hands over. After a scale-out under load the committed state and outputs of
every partition must equal a reference computed straight from the input: nothing lost, nothing twice.
"""

from __future__ import annotations

from pathlib import Path

from dataplane_checks import COUNTS, check_partition
from kubernetes import client
from operator_support import APP, Operators, app, reasons, scale

from localcluster.nodes import process_node_selector, process_node_tolerations
from localcluster.waiting import wait_for
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.executor.generate import GenerateSpec, generate
from streamapp.executor.layout import StateLayout
from streamapp.executor.sink import accepted_manifests
from streamapp.executor.source import FileLog

PARTITIONS = 4


def committed_everything(state: StateLayout, log: FileLog) -> bool:
    """Every partition's accepted batches reach the end of its input."""
    for partition in range(PARTITIONS):
        ends = [m.end for m in accepted_manifests(state, partition)]
        if not ends or ends[-1] != log.end_offset(partition):
            return False
    return True


def test_scale_out_of_real_executors_keeps_output_exactly_once(
    api_client: client.ApiClient, namespace: str, operators: Operators, process_node: str, tmp_path: Path
) -> None:
    log = FileLog(tmp_path / "input")
    state = StateLayout(tmp_path / "state")
    generate(log, GenerateSpec(partitions=PARTITIONS, count=4_000, keys=50, seed=1))
    operators.start()
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StreamApp",
        "metadata": {"name": APP},
        "spec": {
            "replicas": 1,
            "partitions": PARTITIONS,
            "pipeline": {
                "transform": COUNTS,
                "source": {"type": "file", "path": str(tmp_path / "input")},
                "sink": {"type": "file", "path": str(tmp_path / "outputs")},
                "stateStore": {"uri": f"file://{tmp_path / 'state'}"},
            },
            "executor": {
                "image": "unused-on-the-process-node",
                "sparkConf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
                "podTemplate": {
                    "spec": {
                        "nodeSelector": process_node_selector(),
                        "tolerations": process_node_tolerations(),
                        # Every pod of the process node shares the host's ports: no HTTP server, and
                        # readiness is the process being up.
                        "containers": [
                            {
                                "name": "executor",
                                "env": [{"name": "STREAMAPP_HTTP_PORT", "value": "0"}],
                                "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
                            }
                        ],
                    }
                },
            },
            "rebalance": {"maxWarmupReplicas": PARTITIONS},
        },
    }
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(lambda: committed_everything(state, log), 300, "member 0 processing all input")

    scale(api_client, namespace, 2)
    generate(log, GenerateSpec(partitions=PARTITIONS, count=4_000, keys=50, seed=2))

    def settled() -> bool:
        status = app(api_client, namespace).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        members = {m["id"]: m["active"] for m in status.get("members") or []}
        return (
            members == {0: 2, 1: 2}
            and conditions.get("Rebalancing") == "False"
            and committed_everything(state, log)
        )

    wait_for(settled, 300, "two members sharing the partitions with all input committed")
    assert "WarmupPromoted" in reasons(api_client, namespace)
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)
