"""Real executors under the operator: PySpark processes on the process node, scaled out mid-stream.

The operator places member pods on the process node, where each runs `streamapp executor
--from-cluster` for real: the membership client follows the member's target and the PySpark runtime
processes, warms up and hands over. After a scale-out under load the committed state and outputs of
every partition must equal a reference computed straight from the input: nothing lost, nothing twice.
The executors' own counters agree: the records they report processed add up to the input, each once
(the new member may have had none left to process), and both report busy time (what `spec.autoscaling` measures a member's true rate by).
"""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client
from nodeapp import NodeApp
from operator_support import reasons, scale

from localcluster.waiting import wait_for

PARTITIONS = 4


def test_scale_out_of_real_executors_keeps_output_exactly_once(
    api_client: client.ApiClient, namespace: str, node_app: Callable[..., NodeApp]
) -> None:
    app_on_node = node_app(
        partitions=PARTITIONS, replicas=1, count=4_000, keys=50, claim=False, maxWarmupReplicas=PARTITIONS
    )

    scale(api_client, namespace, 2)
    app_on_node.more_input(4_000, 50, seed=2)

    def settled() -> bool:
        status = app_on_node.status()
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        members = {m["id"]: m["active"] for m in status.get("members") or []}
        return (
            members == {0: 2, 1: 2} and conditions.get("Rebalancing") == "False" and app_on_node.processed()
        )

    wait_for(settled, 300, "two members sharing the partitions with all input committed")
    assert "WarmupPromoted" in reasons(api_client, namespace)
    app_on_node.check_output()

    total = 4_000 + 4_000  # the records generated, over all partitions

    seen: list[tuple[int | None, float | None]] = []

    def counted() -> list[tuple[int | None, float | None]] | None:
        seen[:] = [app_on_node.processing(member) for member in (0, 1)]
        return seen if sum(r or 0 for r, _ in seen) >= total else None

    try:
        reported = wait_for(counted, 120, f"the executors to report {total:,} records processed between them")
    except AssertionError as timeout:
        raise AssertionError(f"{timeout}; (processedRecords, busySeconds) per member: {seen}") from None
    assert sum(r or 0 for r, _ in reported) == total, reported
    assert all(busy is not None and busy > 0 for _, busy in reported), reported
