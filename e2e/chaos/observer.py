"""The outside observer: polls the API server and the state store while faults fly, records violations.

Two safety properties are checked at every observed instant, from what anyone outside can see:

* **single active owner** — a task is reported `active` and not fenced (no `fencedBy`: no higher epoch
  in its store) by at most one member. Only *current* reports
  count: the StreamAppMember's `status.podUID` is the uid of the live pod, its container is running,
  and the report was made by a process started (`status.startedAt`) no earlier than that container
  (a report left behind by a SIGKILLed process says nothing about now) — the operator's own rule.
  Members come from one LIST and pods from the next, each a consistent snapshot; every violation
  is recorded with the evidence behind it (versions, epochs, times, container starts).
* **epochs never go backwards** — per member and task, the epoch in the member's spec never
  decreases; per task, no member is ever handed an active epoch below one already handed out; per
  partition, accepted commit manifests have non-decreasing epochs and every epoch has one owner.

The observer keeps running through API-server outages (those polls are counted as missed).
"""

from __future__ import annotations

import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes import client

from manifestfeed import published_after
from streamapp.api.names import GROUP, MEMBERS, VERSION, selector
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head

REQUEST_TIMEOUT_S = 5.0
HISTORY = 400
"""Member versions kept (every member, each time what it says changed): enough for the last minute
of a busy chaos run, so a double owner's evidence shows how both members got there."""


@dataclass
class Tally:
    """What the observer saw (a plain record; the report renders it)."""

    polls: int = 0
    missed_polls: int = 0
    manifests_accepted: int = 0
    manifests_refused: int = 0
    violations: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    max_active_owners: int = 0


def _instant(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def current_reports(members: list[dict[str, Any]], pods: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """Member name → task reports written by the process that runs in its live pod now; pure.

    A report is the running process's when that process started no earlier than its container.
    Comparing when the report was *written* with the container's start was not exact: both are whole
    seconds, so the last report of a process SIGKILLed in the same second as its container restarted
    counted as the new process's until that one wrote its own (after its Spark session started) — its
    tasks, meanwhile restored elsewhere, looked active on two members. A process that lived a second
    or more (any that reported tasks: a Spark session takes seconds to start) started in an earlier
    second than its successor's container."""
    live = {p.metadata.name: p for p in pods}
    current: dict[str, list[dict[str, Any]]] = {}
    for member in members:
        name = member["metadata"]["name"]
        status = member.get("status") or {}
        pod = live.get(name)
        if pod is None or pod.metadata.uid != status.get("podUID"):
            continue
        started = _container_started(pod)
        process = _instant(status.get("startedAt"))
        if started is None or process is None or process < started:
            continue
        current[name] = list(status.get("tasks") or [])
    return current


def _container_started(pod: Any) -> datetime | None:
    """When the pod's running container (the newest, if several) last started; None if none runs."""
    started = [
        s.state.running.started_at
        for s in (pod.status.container_statuses or [])
        if s.state is not None and s.state.running is not None and s.state.running.started_at is not None
    ]
    return max(started) if started else None


def member_line(member: dict[str, Any]) -> str:
    """What one version of a member says, in one line: its target's generation and active epochs,
    and its report's acknowledged generation, pod, process start and active epochs; pure."""
    spec, status = member.get("spec") or {}, member.get("status") or {}
    target = ",".join(f"{e['task']}@{e['epoch']}" for e in spec.get("active") or [])
    reported = ",".join(
        f"{t['task']}@{t.get('epoch')}" + ("(fenced)" if t.get("fencedBy") else "")
        for t in status.get("tasks") or []
        if t.get("role") == "active"
    )
    return (
        f"rv={member['metadata'].get('resourceVersion')} spec gen {spec.get('generation')} "
        f"active [{target}] | acked {status.get('observedGeneration')} pod "
        f"{str(status.get('podUID'))[:8]} started {status.get('startedAt')} active [{reported}]"
    )


def evidence(members: list[dict[str, Any]], pods: list[Any], names: list[str], task: int) -> str:
    """What the observer saw of `names` when it found `task` active on them: each member's
    resourceVersion, target generation and epoch, acknowledged generation, report times and role,
    and its pod's uid, readiness and container starts; pure."""
    live = {p.metadata.name: p for p in pods}
    parts = []
    for member in members:
        name = member["metadata"]["name"]
        if name not in names:
            continue
        spec, status = member.get("spec") or {}, member.get("status") or {}
        target = {int(e["task"]): int(e["epoch"]) for e in spec.get("active") or []}
        report = [r for r in status.get("tasks") or [] if int(r["task"]) == task]
        pod = live.get(name)
        containers = (
            [
                f"{s.name} restarts={s.restart_count} running_since="
                f"{s.state.running.started_at.isoformat() if s.state and s.state.running else None}"
                for s in pod.status.container_statuses or []
            ]
            if pod is not None
            else []
        )
        ready = (
            [c.status for c in pod.status.conditions or [] if c.type == "Ready"] if pod is not None else []
        )
        parts.append(
            f"{name}: rv={member['metadata'].get('resourceVersion')} generation={spec.get('generation')} "
            f"target epoch={target.get(task)} acked={status.get('observedGeneration')} "
            f"podUID={status.get('podUID')} startedAt={status.get('startedAt')} "
            f"reportedAt={status.get('reportedAt')} report={report}; pod "
            + (
                f"uid={pod.metadata.uid} rv={pod.metadata.resource_version} ready={ready} {containers}"
                if pod is not None
                else "gone"
            )
        )
    return " | ".join(parts)


def owning(task: dict[str, Any]) -> bool:
    """Whether a task report claims ownership: active and not fenced. An active task whose store holds a
    higher epoch than its own reports `fencedBy`: the executor itself says it processes nothing (it
    lost the commit race, or learned of the newer owner), so it owns nothing; pure."""
    return task.get("role") == "active" and not task.get("fencedBy")


def double_actives(reports: dict[str, list[dict[str, Any]]]) -> dict[int, list[str]]:
    """Tasks that more than one member claims to own; pure."""
    owners: dict[int, list[str]] = {}
    for name, tasks in reports.items():
        for task in tasks:
            if owning(task):
                owners.setdefault(int(task["task"]), []).append(name)
    return {task: names for task, names in owners.items() if len(names) > 1}


class Observer:
    """A thread polling every `period_s` until stopped; `tally` holds the result."""

    def __init__(
        self, api: client.ApiClient, namespace: str, app: str, state: StateLayout, partitions: int
    ) -> None:
        self.api, self.namespace, self.app = api, namespace, app
        self.state, self.partitions = state, partitions
        self.tally = Tally()
        self.heads = {p: Head() for p in range(partitions)}
        self.last_accepted_epoch: dict[int, int] = {}
        self.epoch_owner: dict[tuple[int, int], str] = {}
        self.spec_epochs: dict[tuple[str, int], int] = {}
        self.highest_active_epoch: dict[int, int] = {}
        self.lines: dict[str, str] = {}
        self.history: deque[str] = deque(maxlen=HISTORY)
        self.explained: set[tuple[str, ...]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-observer", daemon=True)

    def start(self, period_s: float = 0.2) -> None:
        self.period_s = period_s
        self._thread.start()

    def stop(self) -> Tally:
        self._stop.set()
        self._thread.join()
        self.poll_manifests()
        return self.tally

    def _violation(self, text: str) -> None:
        self.tally.violations.append(f"{datetime.now().isoformat(timespec='milliseconds')} {text}")

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.tally.polls += 1
            try:
                self.poll_cluster()
            except Exception:  # an API-server outage is part of the scenario: count it, go on
                self.tally.missed_polls += 1
            self.poll_manifests()

    def poll_cluster(self) -> None:
        listed: dict[str, Any] = client.CustomObjectsApi(self.api).list_namespaced_custom_object(
            GROUP,
            VERSION,
            self.namespace,
            MEMBERS,
            label_selector=selector(self.app),
            _request_timeout=REQUEST_TIMEOUT_S,
        )
        members = listed["items"]
        pods = (
            client.CoreV1Api(self.api)
            .list_namespaced_pod(
                self.namespace, label_selector=selector(self.app), _request_timeout=REQUEST_TIMEOUT_S
            )
            .items
        )
        self._remember(members)
        reports = current_reports(members, pods)
        for task, names in double_actives(reports).items():
            self._violation(f"task {task} active on {sorted(names)} at once")
            self.tally.evidence.append(f"task {task}: {evidence(members, pods, names, task)}")
            key = tuple(sorted(names))
            if key not in self.explained:
                self.explained.add(key)
                mine = [line for line in self.history if line.split(" ", 2)[1] in names]
                self.tally.evidence.append(f"how {list(key)} got there:\n" + "\n".join(mine))
        per_task = Counter(int(t["task"]) for tasks in reports.values() for t in tasks if owning(t))
        self.tally.max_active_owners = max([self.tally.max_active_owners, *per_task.values()])
        for member in members:
            self._check_spec_epochs(member["metadata"]["name"], member.get("spec") or {})

    def _remember(self, members: list[dict[str, Any]]) -> None:
        """Keep each member's version in `history` when what it says changed since the last poll."""
        stamp = datetime.now().isoformat(timespec="milliseconds")
        for member in members:
            name, line = member["metadata"]["name"], member_line(member)
            if self.lines.get(name) != line:
                self.lines[name] = line
                self.history.append(f"{stamp} {name} {line}")

    def _check_spec_epochs(self, name: str, spec: dict[str, Any]) -> None:
        for entry in [*(spec.get("active") or []), *(spec.get("revoking") or [])]:
            key = (name, int(entry["task"]))
            epoch = int(entry["epoch"])
            if epoch < self.spec_epochs.get(key, 0):
                self._violation(f"{name} task {key[1]}: spec epoch {self.spec_epochs[key]} -> {epoch}")
            self.spec_epochs[key] = epoch
        for entry in spec.get("active") or []:
            task, epoch = int(entry["task"]), int(entry["epoch"])
            highest = self.highest_active_epoch.get(task, 0)
            if epoch < highest:
                self._violation(
                    f"{name} active on task {task} at epoch {epoch} < {highest} handed out before"
                )
            self.highest_active_epoch[task] = max(highest, epoch)

    def poll_manifests(self) -> None:
        for partition in range(self.partitions):
            for found, step in published_after(self.state, partition, self.heads[partition]):
                self.heads[partition] = step.head
                if not step.accepted:
                    self.tally.manifests_refused += 1
                    continue
                self.tally.manifests_accepted += 1
                self._check_manifest(partition, found)

    def _check_manifest(self, partition: int, found: manifests.Manifest) -> None:
        last = self.last_accepted_epoch.get(partition, 0)
        if found.epoch < last:
            self._violation(f"partition {partition} seq {found.seq}: accepted epoch {found.epoch} < {last}")
        self.last_accepted_epoch[partition] = max(last, found.epoch)
        owner = self.epoch_owner.setdefault((partition, found.epoch), found.owner)
        if owner != found.owner:
            self._violation(
                f"partition {partition} epoch {found.epoch} committed by {owner} and {found.owner}"
            )
