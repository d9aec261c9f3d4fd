"""`executor.serviceAccountScope: app` on real executors: every member runs as the one ServiceAccount
`<app>-executors` (what a workload identity binding names once), follows its target and reports
through it, and the output is exactly once."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes import client
from nodeapp import NodeApp
from operator_support import APP

from localcluster.waiting import wait_for
from streamapp.api.names import selector, shared_executor_account


def test_executors_sharing_one_account_follow_their_targets_and_report(
    api_client: client.ApiClient, namespace: str, node_app: Callable[..., NodeApp]
) -> None:
    app = node_app(
        partitions=4, replicas=2, count=2_000, keys=50, claim=False, executor={"serviceAccountScope": "app"}
    )
    wait_for(app.settled, 300, "both members processing their tasks")
    core = client.CoreV1Api(api_client)
    pods = core.list_namespaced_pod(namespace, label_selector=selector(APP)).items
    shared = shared_executor_account(APP)
    assert {pod.spec.service_account_name for pod in pods} == {shared}
    accounts = {account.metadata.name for account in core.list_namespaced_service_account(namespace).items}
    assert shared in accounts
    assert not {f"{APP}-0", f"{APP}-1"} & accounts, "no per-member account beside the shared one"
    app.more_input(1_000, 50, seed=2)
    wait_for(app.processed, 300, "the new input committed")
    app.check_output()
