"""An evicted member hands its tasks over before its pod goes (real executors, real API server).

Three real PySpark executors on the process node count a continuous input. One member's pod is evicted
through the Eviction API (policy/v1), as a node drain does, within the app's PodDisruptionBudget. The
operator sees the pod terminating while its executor is still Ready, marks the member retiring, and
hands its tasks over through warmup → revoke → ack → assign; the executor, on SIGTERM, keeps following
its target until it owns nothing, then exits. Checked from the outside: each moved task was a warmup (or
standby) on its new owner before it was active there, no task is active on two members at any observed
instant, epochs never go backwards, the evicted executor stopped because it had handed everything over,
and the output is exactly once.

The longest per-task commit gap during the eviction is recorded beside that of a plain SIGKILL of
another member's executor (its pod restarts it in place), measured from the commit manifests; with
STREAMAPP_EVICTION_RESULTS=1 the figures are written to bench/results/eviction.md.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import APP, Operators

from chaos.observer import Observer, current_reports
from demo import downtime
from demo.commits import CommitLog
from demo.driver import kill_member
from localcluster.controlplane import LocalCluster
from localcluster.waiting import wait_for
from realapps import app_on_process_node, committed_everything, feeding
from streamapp.api.names import APPS, GROUP, MEMBERS, VERSION, member_name, selector
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

PARTITIONS = 6
REPLICAS = 3
RATE = 30.0
KEYS = 40
STEP_TIMEOUT_S = 600.0
GRACE_S = 300
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "eviction.md"
HANDED_OVER = "stopping after SIGTERM: handed every task over"


class RoleHistory:
    """Polls the members' current reports and keeps, per (member, task), the roles in the order first
    seen: whether a new owner warmed a task up before it took it over."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.seen: dict[tuple[str, int], list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="role-history", daemon=True)

    def __enter__(self) -> RoleHistory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                reports = current_reports(*members_and_pods(self.api, self.namespace))
            except Exception:  # a missed poll is only a poll missed
                continue
            for name, tasks in reports.items():
                for task in tasks:
                    roles = self.seen.setdefault((name, int(task["task"])), [])
                    if not roles or roles[-1] != task["role"]:
                        roles.append(str(task["role"]))


def members_and_pods(api: client.ApiClient, namespace: str) -> tuple[list[dict[str, Any]], list[Any]]:
    custom = client.CustomObjectsApi(api)
    listed = custom.list_namespaced_custom_object(
        GROUP, VERSION, namespace, MEMBERS, label_selector=selector(APP), _request_timeout=5
    )
    pods = client.CoreV1Api(api).list_namespaced_pod(
        namespace, label_selector=selector(APP), _request_timeout=5
    )
    return listed["items"], pods.items


def active_owners(api: client.ApiClient, namespace: str) -> dict[int, str]:
    """Task → the member whose current report has it active (from one consistent listing)."""
    reports = current_reports(*members_and_pods(api, namespace))
    return {int(t["task"]): name for name, tasks in reports.items() for t in tasks if t["role"] == "active"}


def balanced(api: client.ApiClient, namespace: str) -> dict[int, str] | None:
    """Every task active somewhere and every member owning its share."""
    owners = active_owners(api, namespace)
    counts = [list(owners.values()).count(member_name(APP, m)) for m in range(REPLICAS)]
    return owners if len(owners) == PARTITIONS and min(counts) == PARTITIONS // REPLICAS else None


def evict(core: client.CoreV1Api, namespace: str, pod: str) -> bool:
    """Ask the Eviction API; False while the PodDisruptionBudget refuses (429: not computed yet)."""
    body = client.V1Eviction.model_validate({"metadata": {"name": pod, "namespace": namespace}})
    try:
        core.create_namespaced_pod_eviction(pod, namespace, body)
    except ApiException as error:
        if error.status == 429:
            return False
        raise
    return True


def pod_uid(core: client.CoreV1Api, namespace: str, name: str) -> str | None:
    try:
        return str(core.read_namespaced_pod(name, namespace).metadata.uid)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


@contextmanager
def commits_followed(log: CommitLog) -> Iterator[None]:
    """Read new commit manifests every half second (their mtimes are the commit instants)."""
    stop = threading.Event()

    def follow() -> None:
        while not stop.wait(0.5):
            log.poll()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        log.poll()


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(2400)
def test_an_evicted_member_hands_its_tasks_over_before_its_pod_goes(
    local_cluster: LocalCluster | None,
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    process_node: str,
    tmp_path: Path,
) -> None:
    if local_cluster is None:
        pytest.skip("the SIGKILL comparison acts on the process node's processes")
    core = client.CoreV1Api(api_client)
    log, state = FileLog(tmp_path / "input"), StateLayout(tmp_path / "state")
    generate(log, GenerateSpec(partitions=PARTITIONS, count=1_200, keys=KEYS, seed=1))
    operators.start()
    body = app_on_process_node(APP, tmp_path, PARTITIONS, replicas=REPLICAS)
    # A grace period far above a handoff's few batches, even on a machine loaded many times over, so
    # the evicted executor stops because it handed everything over, not because its budget ran out.
    body["spec"]["executor"]["terminationGracePeriodSeconds"] = GRACE_S
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(lambda: committed_everything(state, log, PARTITIONS), STEP_TIMEOUT_S, "the initial input")
    before = wait_for(lambda: balanced(api_client, namespace), STEP_TIMEOUT_S, "two tasks per member")

    victim = member_name(APP, 1)
    moved = sorted(t for t, owner in before.items() if owner == victim)
    evicted_uid = pod_uid(core, namespace, victim)
    commits = CommitLog(state, PARTITIONS)
    observer = Observer(api_client, namespace, APP, state, PARTITIONS)
    spec = GenerateSpec(partitions=PARTITIONS, count=None, rate=RATE, keys=KEYS, seed=7)
    with feeding(log, spec), commits_followed(commits), RoleHistory(api_client, namespace) as roles:
        observer.start()
        time.sleep(10)  # undisturbed commits before the eviction: the usual gap
        evicted_at = time.time()
        wait_for(lambda: evict(core, namespace, victim), STEP_TIMEOUT_S, "the PDB to allow the eviction")

        def handed_over() -> dict[int, str] | None:
            owners = active_owners(api_client, namespace)
            gone = pod_uid(core, namespace, victim) != evicted_uid
            taken = all(owners.get(t) not in (None, victim) for t in moved)
            return owners if gone and taken else None

        after = wait_for(handed_over, STEP_TIMEOUT_S, f"{victim}'s tasks taken over and its pod gone")
        handed_at = time.time()
        wait_for(lambda: balanced(api_client, namespace), STEP_TIMEOUT_S, "the new pod back in the app")
        time.sleep(10)

        killed = member_name(APP, 0)
        stalled = sorted(t for t, owner in active_owners(api_client, namespace).items() if owner == killed)
        killed_at = time.time()
        kill_member(local_cluster, core.read_namespaced_pod(killed, namespace))
        wait_for(
            lambda: all((commits.last_commit(t) or 0) > killed_at + 1 for t in stalled),
            STEP_TIMEOUT_S,
            f"{killed}'s tasks committing again after its SIGKILL",
        )
        recovered_at = time.time()
    wait_for(lambda: committed_everything(state, log, PARTITIONS), STEP_TIMEOUT_S, "all input committed")
    tally = observer.stop()
    commits.poll()

    assert tally.violations == [], "\n".join([*tally.violations, *tally.evidence])
    for task in moved:
        new_owner = after[task]
        history = roles.seen.get((new_owner, task), [])
        assert history[:1] in (["warmup"], ["standby"]) and "active" in history, (task, new_owner, history)
    evicted_log = local_cluster.layout.process_node / "pods" / f"{namespace}_{victim}_{evicted_uid}"
    assert HANDED_OVER in (evicted_log / "executor.log").read_text(), "the evicted executor was cut short"
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)

    eviction = downtime.per_task(commits.commits, PARTITIONS, evicted_at - 5, handed_at + 5)
    crash = downtime.per_task(commits.commits, PARTITIONS, killed_at - 5, recovered_at)
    figures = {
        "eviction (handoff)": max(g.seconds for g in eviction if g.partition in moved),
        "SIGKILL (restart in place)": max(g.seconds for g in crash if g.partition in stalled),
        "usual gap (median over the whole run)": statistics.median(g.usual for g in whole_run(commits)),
    }
    print({k: round(v, 1) for k, v in figures.items()})
    if os.environ.get("STREAMAPP_EVICTION_RESULTS") == "1":
        RESULTS.write_text(render(figures, moved, stalled, eviction, crash, evicted_at, killed_at))


def whole_run(commits: CommitLog) -> list[downtime.Gap]:
    """Every task's gaps over the whole run: their medians are the usual commit interval."""
    times = [c.at for c in commits.commits]
    return downtime.per_task(commits.commits, PARTITIONS, min(times), max(times))


def render(
    figures: dict[str, float],
    moved: list[int],
    stalled: list[int],
    eviction: list[downtime.Gap],
    crash: list[downtime.Gap],
    evicted_at: float,
    killed_at: float,
) -> str:
    """The recorded figures as a results page, with the command that produced them."""
    lines = [
        "# Eviction handoff vs a plain SIGKILL (real executors, local cluster)",
        "",
        "Produced by `STREAMAPP_EVICTION_RESULTS=1 STREAMAPP_CLUSTER_DIR=/tmp/cluster-drain "
        ".venv/bin/python -m pytest -q tests/integration/test_eviction_handoff.py -s` "
        f"({PARTITIONS} tasks, {REPLICAS} members, {RATE:.0f} records/s, 2 cores shared with other work).",
        "",
        "Longest gap between two commits of a task, from the commit manifests' mtimes (`e2e/demo/downtime.py`).",
        "",
        "| case | longest per-task commit gap |",
        "|---|---|",
        *(f"| {name} | {seconds:.1f} s |" for name, seconds in figures.items()),
        "",
        f"Eviction of member 1 (tasks {', '.join(map(str, moved))}):",
        "",
        "```",
        downtime.table([g for g in eviction if g.partition in moved], [(evicted_at, "eviction")], evicted_at),
        "```",
        "",
        f"SIGKILL of member 0's executor (tasks {', '.join(map(str, stalled))}):",
        "",
        "```",
        downtime.table([g for g in crash if g.partition in stalled], [(killed_at, "SIGKILL")], killed_at),
        "```",
        "",
    ]
    return "\n".join(lines)
