"""A changed image rolls an app of real executors under flowing input without a task standing still.

Three real PySpark executors on the process node take continuous input; `executor.image` changes.
The process node ignores images, but the pod-template hash changes, so every member pod is replaced,
each after handing its tasks to warm successors (`rollingUpdate.strategy: auto` is `handoff` here).
Checked from outside: every pod was replaced and the rollout reported complete; the chaos suite's
observer saw no task active on two members at any instant and no epoch going backwards; every task
ended on a new pod that restored its state in the background (warmed) and restored next to nothing
while active (a cold takeover restores the whole partition there); the output is exactly once.

The longest stand-still of each task during the rollout (the longest gap between its commits, from
the commit manifests' times) is recorded beside its usual gap between batches, not asserted: with
STREAMAPP_ROLLOUT_REPORT=<path> the table is written there (bench/results/rollout.md).
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from handoff_timeline import HandoffTimeline, batch_interval_before, gap_lines, gaps_apart
from kubernetes import client, config
from operator_support import APP, Operators, app, patch_app, reasons

from chaos.observer import Observer, current_reports
from demo import downtime
from demo.commits import CommitLog
from localcluster.waiting import wait_for
from realapps import app_on_process_node, committed_everything, feeding
from streamapp.api.names import APPS, GROUP, MEMBERS, REVISION_LABEL, VERSION, selector
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

PARTITIONS = 6
REPLICAS = 3
KEYS = 20_000
RATE = 60.0  # records per second over all partitions
REPORT = os.environ.get("STREAMAPP_ROLLOUT_REPORT")


class Watch:
    """What the test reads from the API server at each poll: pods, current reports, restore counts."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        # (pod uid, task) → the largest restoredBlocking its active report showed, on pods the rollout
        # created: those running before the change (`old_pods`) took their tasks at the app's start,
        # when a task moved before its first batch had committed replays that one batch.
        self.blocking: dict[tuple[str, int], int] = {}
        self.old_pods: set[str] = set()
        self.timeline = HandoffTimeline()

    def reports(self) -> tuple[dict[str, list[dict[str, Any]]], dict[str, client.V1Pod]]:
        listed: dict[str, Any] = client.CustomObjectsApi(self.api).list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, MEMBERS, label_selector=selector(APP)
        )
        pods = client.CoreV1Api(self.api).list_namespaced_pod(self.namespace, label_selector=selector(APP))
        live = [p for p in pods.items if p.metadata.deletion_timestamp is None]
        reports = current_reports(listed["items"], live)
        self.timeline.saw(time.time(), listed["items"], reports)
        by_name = {p.metadata.name: p for p in live}
        for name, tasks in reports.items():
            for task in tasks:
                if task.get("role") == "active" and by_name[name].metadata.uid not in self.old_pods:
                    key = (by_name[name].metadata.uid, int(task["task"]))
                    seen = int(task.get("restoredBlocking") or 0)
                    self.blocking[key] = max(self.blocking.get(key, 0), seen)
        return reports, by_name

    def balanced(self) -> bool:
        """Ready, not rebalancing, every task active on exactly one member, two per member."""
        status = app(self.api, self.namespace).get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        tasks = status.get("tasks") or {}
        reports, _ = self.reports()
        active = Counter(int(t["task"]) for r in reports.values() for t in r if t.get("role") == "active")
        per_member = sorted(sum(t.get("role") == "active" for t in r) for r in reports.values())
        return (
            conditions.get("Ready") == "True"
            and conditions.get("Rebalancing") == "False"
            and not tasks.get("warming")
            and not tasks.get("revoking")
            and active == Counter(range(PARTITIONS))
            and per_member == [PARTITIONS // REPLICAS] * REPLICAS
        )


def render(
    gaps: list[downtime.Gap], commits: CommitLog, watch: Watch, state_rows: int, since: float, until: float
) -> str:
    longest = max(gaps, key=lambda g: g.seconds)
    before = batch_interval_before(commits.commits, longest.partition, longest.ends - longest.seconds)
    usual = statistics.median(g.usual for g in gaps)
    handing, plain = gaps_apart(commits.commits, watch.timeline, PARTITIONS, since, until)
    return "\n".join(
        [
            "# Rolling update of real executors (image change under flowing input)",
            "",
            "Recorded by `STREAMAPP_ROLLOUT_REPORT=bench/results/rollout.md STREAMAPP_CLUSTER_DIR=... "
            ".venv/bin/python -m pytest -q -m long tests/integration/test_rollout_real_executors.py` on "
            f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC (load average {os.getloadavg()[0]:.0f} on "
            f"{os.cpu_count()} cores): {REPLICAS} real executors on the process node, {PARTITIONS} tasks, "
            f"{RATE:.0f} records/s, `rollingUpdate.strategy: auto` (handoff), no standbys, emptyDir "
            "local state (every moved task is restored on its successor).",
            "",
            f"- rollout: {until - since:.0f} s from the image change to every pod replaced and the app balanced",
            f"- longest per-task commit gap during the rollout: **{longest.seconds:.1f} s** (task "
            f"{longest.partition}); one batch just before it took {before:.1f} s; the median over tasks "
            f"of the usual gap between commits during the rollout: {usual:.1f} s",
            f"- gaps with a step of the task's handoff seen inside: {len(handing)}, longest "
            f"{max(handing, default=0.0):.1f} s; gaps with none (batches alone on this machine): "
            f"{len(plain)}, longest {max(plain, default=0.0):.1f} s, 99th percentile "
            f"{_percentile(plain, 0.99):.1f} s",
            f"- rows a task's new owner (a pod the rollout created) restored while active (restoredBlocking), "
            f"largest seen: "
            f"{max(watch.blocking.values())}; keys of state in the smallest partition at the change "
            f"(what a cold takeover restores at least): {state_rows}",
            "",
            "Per task, times in seconds since the image change. *batch before*: median gap between the "
            "task's last five commits before its longest gap. Handoff steps as polled from outside "
            "(at each of the test's polls): `revoke mX gN` the old owner's spec lists the task as revoking (generation N), "
            "`ack` its status acknowledged that generation, `assign mY eK` the task is active in mY's "
            "spec at epoch K, `active` mY's running process reports it active.",
            "",
            "```",
            *gap_lines(gaps, commits.commits, watch.timeline, since),
            "```",
            "",
        ]
    )


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("claims", [False, True], ids=["emptyDir", "claims"])
def test_a_new_image_rolls_real_executors_without_double_owners_cold_takeovers_or_lost_output(
    api_client: client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    operators: Operators,
    process_node: str,
    tmp_path: Path,
    claims: bool,
) -> None:
    """With claims, copies of the next member's tasks also warm ahead (the Progressing condition says
    which member hands off next), the member handing off warming some on its claim."""
    log = FileLog(tmp_path / "input")
    state = StateLayout(tmp_path / "state")
    watch = Watch(api_client, namespace)
    generate(log, GenerateSpec(partitions=PARTITIONS, count=6_000, keys=KEYS, seed=1))
    operators.start()
    body = app_on_process_node(APP, tmp_path, PARTITIONS, replicas=REPLICAS)
    if claims:
        body["spec"]["executor"]["storage"] = {"size": "1Gi"}
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    said: set[str] = set()
    wait_for(lambda: committed_everything(state, log, PARTITIONS), 600, "the app processing its input")
    observer_api = config.new_client_from_config(config_file=str(kubeconfig_path))
    observer = Observer(observer_api, namespace, APP, state, PARTITIONS)
    try:
        with feeding(log, GenerateSpec(partitions=PARTITIONS, count=None, rate=RATE, keys=KEYS, seed=7)):
            wait_for(watch.balanced, 600, "a balanced app under input")
            _, pods = watch.reports()
            before = {name: pod.metadata.uid for name, pod in pods.items()}
            watch.old_pods = set(before.values())
            old_revision = app(api_client, namespace)["status"]["updateRevision"]
            observer.start()
            time.sleep(10)  # commits before the change, so each task's usual gap is known
            # Rows of state a cold takeover would restore while the task stands still, at least.
            state_rows = min(len(set(log.read_arrow(p).column("key").to_pylist())) for p in range(PARTITIONS))
            since = time.time()
            patch_app(api_client, namespace, {"spec": {"executor": {"image": "streamapp/executor:next"}}})

            def rolled() -> bool:
                status = app(api_client, namespace).get("status") or {}
                progressing = {c["type"]: c for c in status.get("conditions") or []}.get("Progressing", {})
                said.update(part for part in progressing.get("message", "").split("; ") if "next" in part)
                _, pods = watch.reports()
                replaced = all(
                    name in pods and pods[name].metadata.uid != uid for name, uid in before.items()
                )
                return (
                    replaced
                    and status.get("updatedReplicas") == status.get("replicas") == REPLICAS
                    and status.get("currentRevision") == status.get("updateRevision") != old_revision
                    and progressing.get("reason") == "RolloutComplete"
                    and watch.balanced()
                )

            wait_for(rolled, 1200, "every member pod replaced from the new image, the app balanced")
            until = time.time()
            reports, pods = watch.reports()
        wait_for(lambda: committed_everything(state, log, PARTITIONS), 300, "all input committed")
    finally:
        tally = observer.stop()
        observer_api.close()

    assert tally.violations == [], "\n".join([*tally.violations, *tally.evidence])
    assert tally.polls > 0 and tally.manifests_accepted > 0
    revision = app(api_client, namespace)["status"]["updateRevision"]
    assert {p.metadata.labels[REVISION_LABEL] for p in pods.values()} == {revision}
    ahead = [part for part in said if part.endswith("hands off next: copies of its tasks warm ahead")]
    assert bool(ahead) == claims, said
    assert "MemberLost" not in reasons(api_client, namespace)
    assert "RevocationTimedOut" not in reasons(api_client, namespace)
    # Every task now runs on a pod created during the rollout: it was warmed there (restored in the
    # background) and, once active, restored at most the last batches of its old owner — far less
    # than the partition's state, which a cold takeover restores while the task stands still.
    actives = [
        (pods[name].metadata.uid, t)
        for name, tasks in reports.items()
        for t in tasks
        if t["role"] == "active"
    ]
    assert all(int(t.get("restoredBackground") or 0) > 0 for _, t in actives), actives
    assert max(watch.blocking.values()) < state_rows // 2, (state_rows, watch.blocking)

    commits = CommitLog(state, PARTITIONS)
    commits.poll()
    gaps = downtime.per_task(commits.commits, PARTITIONS, since, until)
    text = render(gaps, commits, watch, state_rows, since, until)
    print(text)
    if REPORT:
        Path(REPORT).write_text(text)
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)
