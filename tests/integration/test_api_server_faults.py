"""The kube-apiserver restarted, paused, killed, and killed then paused soon after its restart, under a
running operator and its executors.

The operator runs as a real `streamapp operator` process; member pods run on kwok nodes and their
executors are the fleet's real membership clients (tests/integration/fleet.py). After each fault the
app is scaled as soon as the API server is back, and must reach the new balanced assignment with no
process restarted: the operator keeps its PID, and every executor that was running keeps running the
same membership client (its run and watch threads alive) and applying the new targets.

The cluster is shared by the whole test session, so every fault is undone in a `finally`, and the
test waits until the API server answers /readyz again.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from fleet import Fleet
from kubernetes import client
from operator_support import APP, Operator, Operators, app, create_app, scale

from kubesetup import create_namespace
from localcluster.controlplane import LocalCluster
from localcluster.waiting import wait_for
from streamapp.executor.membership import MembershipClient

APISERVER = "kube-apiserver"
PARTITIONS = 12
# Long enough for hung connections to time out in the clients (watch reads give up after 25 s), short
# enough that the nodes' 40 s heartbeat grace does not run out.
PAUSE_SECONDS = 30.0
DOWN_SECONDS = 5.0
# A crash, then a hang soon after it (a restarted API server that stalls on a sick disk): short of the
# controller-manager's node-monitor grace (180 s), which would mark every kwok pod NotReady.
CRASH_PAUSE_SECONDS = 20.0
# The bound of "acted on soon after the API server is back": generous, the machine is shared.
SETTLE_SECONDS = 180.0
CAUGHT_UP_SECONDS = 300.0


def wait_controllers_caught_up(api: client.ApiClient) -> None:
    """Wait until the controller-manager acts on new objects again, so the tests after this one find a
    working cluster: after an outage its watches come back with a jittered backoff of up to a minute per
    try, and until then a new namespace gets no `default` ServiceAccount (seen: none within 60 s)."""
    name = f"t-caught-up-{uuid.uuid4().hex[:6]}"
    create_namespace(api, name, {"streamapp.dev/test": "true"}, timeout_s=CAUGHT_UP_SECONDS)
    client.CoreV1Api(api).delete_namespace(name)


@contextlib.contextmanager
def restored(cluster: LocalCluster) -> Iterator[None]:
    """Whatever happens inside, the API server is running, continued and ready afterwards."""
    try:
        yield
    finally:
        cluster.resume_component(APISERVER)
        with contextlib.suppress(RuntimeError):  # still running: nothing to start
            cluster.start_component(APISERVER)
        cluster.wait_component_ready(APISERVER)


def restart(cluster: LocalCluster) -> None:
    cluster.restart_component(APISERVER)


def pause(cluster: LocalCluster) -> None:
    cluster.pause_component(APISERVER)
    time.sleep(PAUSE_SECONDS)
    cluster.resume_component(APISERVER)


def kill(cluster: LocalCluster) -> None:
    cluster.kill_component(APISERVER)
    time.sleep(DOWN_SECONDS)
    cluster.start_component(APISERVER)


def crash_then_pause(cluster: LocalCluster) -> None:
    kill(cluster)
    cluster.pause_component(APISERVER)
    time.sleep(CRASH_PAUSE_SECONDS)
    cluster.resume_component(APISERVER)


FAULTS: list[tuple[str, Callable[[LocalCluster], None], int]] = [
    ("restart", restart, 3),
    ("pause", pause, 4),
    ("kill", kill, 2),
    ("crash then pause", crash_then_pause, 1),
]


@dataclasses.dataclass(frozen=True)
class Balance:
    """Whether the app is balanced, and what the test saw: a timeout then says which part was missing."""

    ok: bool
    seen: str

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return self.seen


def balanced(api: client.ApiClient, namespace: str, fleet: Fleet, replicas: int) -> Balance:
    """Every task active on exactly one live member, spread ≤ 1, nothing in flight, Ready — as the
    executors apply it and as the app's status says."""
    try:
        status = app(api, namespace).get("status") or {}
    except Exception as error:  # the API server still settling
        return Balance(False, f"the app unreadable: {error.__class__.__name__}")
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    owners = {task: m for m, target in fleet.targets().items() for task in target.active_epochs()}
    counts = [list(owners.values()).count(m) for m in range(replicas)]
    ok = (
        len(owners) == PARTITIONS
        and set(owners.values()) == set(range(replicas))
        and max(counts) - min(counts) <= 1
        and conditions.get("Ready") == "True"
        and conditions.get("Rebalancing") == "False"
    )
    seen = (
        f"tasks active per member {dict(sorted(collections.Counter(owners.values()).items()))}, "
        f"members running {sorted(fleet.running)}, conditions {conditions}, "
        f"replicas {status.get('replicas')}, ready {status.get('readyReplicas')}, tasks {status.get('tasks')}"
    )
    return Balance(ok, seen)


def retried(call: Callable[[], None], what: str) -> None:
    """A write from the test itself, repeated until the freshly returned API server takes it."""

    def attempt() -> bool:
        try:
            call()
        except Exception:
            return False
        return True

    wait_for(attempt, 60, what, interval_s=1.0)


def assert_same_processes(
    operator: Operator, pid: int, fleet: Fleet, before: dict[int, MembershipClient]
) -> None:
    assert operator.process.poll() is None and operator.process.pid == pid, "the operator was restarted"
    for member, membership in before.items():
        assert fleet.clients.get(member) is membership, f"member {member}'s executor was restarted"
        _, _, runner = fleet.running[member]
        watcher = fleet.clients[member].watcher
        assert runner.is_alive() and watcher is not None and watcher.is_alive(), f"member {member} went deaf"
        assert fleet.clients[member].healthy(), f"member {member}'s readiness did not come back"


def test_scales_are_acted_on_after_the_api_server_restarts_pauses_dies_and_crashes_then_hangs(
    local_cluster: LocalCluster | None,
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
) -> None:
    if local_cluster is None:
        pytest.skip("needs the local control plane, whose API server the test can stop")
    operator = operators.start()
    pid = operator.process.pid
    create_app(api_client, namespace, replicas=2, partitions=PARTITIONS)
    with contextlib.ExitStack() as stack:
        stack.callback(wait_controllers_caught_up, api_client)
        fleet = stack.enter_context(Fleet(api_client, namespace, APP))
        wait_for(lambda: balanced(api_client, namespace, fleet, 2), 120, "a balanced app on 2 members")
        for name, fault, replicas in FAULTS:
            before = dict(fleet.clients)
            with restored(local_cluster):
                fault(local_cluster)
            back = time.monotonic()
            retried(lambda r=replicas: scale(api_client, namespace, r), f"scaling to {replicas} after {name}")
            wait_for(
                functools.partial(balanced, api_client, namespace, fleet, replicas),
                SETTLE_SECONDS,
                f"the app balanced on {replicas} members after the API server's {name}",
            )
            print(
                f"{name}: balanced on {replicas} members {time.monotonic() - back:.1f}s after the API returned"
            )
            assert_same_processes(operator, pid, fleet, {m: c for m, c in before.items() if m < replicas})
        assert fleet.violations.double_owned == [], fleet.violations.double_owned
        assert fleet.violations.cold_handoffs == [], fleet.violations.cold_handoffs
