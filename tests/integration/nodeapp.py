"""The preamble of the tests that kill, stop or restart a member's executor on the local process node
(fixture `node_app` in conftest): the counting app of real executors, its input generated, the
operator started, the app created, and every partition processed — then the executors to act on."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators, app

from chaos.faults import executor_pid
from localcluster.waiting import wait_for
from processnode import procfs
from realapps import app_on_process_node, committed_everything
from streamapp.api.names import APPS, GROUP, MEMBERS, VERSION, member_name
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout


@dataclass(frozen=True)
class NodeApp:
    """One counting app on the process node: its input (`log`), shared store (`state`) and outputs."""

    api: client.ApiClient
    namespace: str
    root: Path
    node: Path
    partitions: int
    replicas: int
    log: FileLog
    state: StateLayout

    def more_input(self, count: int, keys: int, seed: int) -> None:
        """Append `count` records over `keys` keys, spread over the partitions."""
        generate(self.log, GenerateSpec(partitions=self.partitions, count=count, keys=keys, seed=seed))

    def processed(self) -> bool:
        """Whether every partition's input is committed."""
        return committed_everything(self.state, self.log, self.partitions)

    def status(self) -> dict[str, Any]:
        """The app's status as stored now."""
        return dict(app(self.api, self.namespace).get("status") or {})

    def processing(self, member: int) -> tuple[int | None, float | None]:
        """What the member's executor last reported of its work since it started: input records its
        active copies committed, and seconds its batch rounds ran (StreamAppMember status)."""
        body = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, MEMBERS, member_name(APP, member)
        )
        status = body.get("status") or {}
        return status.get("processedRecords"), status.get("busySeconds")

    def ready(self, member: int) -> bool:
        """Whether the member's pod exists and is Ready."""
        try:
            pod = client.CoreV1Api(self.api).read_namespaced_pod(member_name(APP, member), self.namespace)
        except client.ApiException as error:
            if error.status == 404:
                return False
            raise
        conditions = (pod.status.conditions if pod.status else None) or []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    def settled(self) -> bool:
        """Every task active and none moving, and every member processing some: before the last
        member is ready, the others own every task and nothing is warming yet."""
        status = self.status()
        counts = status.get("tasks") or {}
        members = status.get("members") or []
        return (
            counts.get("active") == self.partitions
            and not counts.get("warming")
            and not counts.get("revoking")
            and sum(1 for member in members if member.get("active")) == self.replicas
        )

    def executor(self, member: int) -> int:
        """The process id of the member's running executor (its current pod's container)."""
        found = executor_pid(self.node, str(pod_uid(self.api, self.namespace, member)))
        assert found is not None, f"member {member}'s executor is not running"
        return found[0]

    def kill(self, member: int) -> None:
        """SIGKILL the member's executor and everything it started: no checkpoint at exit; the kubelet
        restarts the container in place."""
        procfs.signal_group(self.executor(member), signal.SIGKILL)

    def check_output(self) -> None:
        """Every partition's output equals the reference computed from its input, once each."""
        for partition in range(self.partitions):
            check_partition(self.state, self.root / "outputs", self.log, partition)


def pod_uid(api: client.ApiClient, namespace: str, member: int) -> str | None:
    """The UID of the member's pod, None while it has none."""
    try:
        return str(
            client.CoreV1Api(api).read_namespaced_pod(member_name(APP, member), namespace).metadata.uid
        )
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def start(
    api: client.ApiClient,
    namespace: str,
    operators: Operators,
    root: Path,
    node: Path,
    *,
    partitions: int,
    replicas: int,
    count: int,
    keys: int,
    claim: bool = True,
    spec: Mapping[str, Any] | None = None,
    executor: Mapping[str, Any] | None = None,
    **rebalance: Any,
) -> NodeApp:
    """Generate `count` records over `keys` keys a partition, start the operator, create the app
    (`claim`: its members keep their state on a claim; `spec`: top-level spec keys besides; `executor`:
    keys of the executor block; `rebalance`: its rebalance block) and wait until every partition is
    processed."""
    created = NodeApp(
        api, namespace, root, node, partitions, replicas, FileLog(root / "input"), StateLayout(root / "state")
    )
    created.more_input(count, keys, seed=1)
    operators.start()
    body = app_on_process_node(APP, root, partitions, replicas=replicas, **rebalance)
    if claim:
        body["spec"]["executor"]["storage"] = {"size": "1Gi"}
    body["spec"].update(spec or {})
    body["spec"]["executor"].update(executor or {})
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(created.processed, 400, "every partition processed")
    return created
