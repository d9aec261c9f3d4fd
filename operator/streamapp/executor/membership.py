"""The executor's side of the rebalance protocol: follow the member's target, acknowledge, report.

The operator writes the member's target to its StreamAppMember spec; this client watches it, has the
data plane apply it — revoked tasks finish their batch, commit and stop *before* the acknowledgement
— and only then writes `status.observedGeneration`, which is what lets the operator hand those tasks
to someone else. Progress (per-task role, epoch, applied position, lag) is reported when it changes,
at most every `report_interval`, and every report names the pod that made it, so the operator can
ignore reports from before a restart.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from streamapp.controller.naming import GROUP, MEMBERS, VERSION, member_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberTarget:
    """A member's target as its StreamAppMember spec states it."""

    generation: int
    active: Mapping[int, int]
    revoking: Mapping[int, int]
    standby: frozenset[int]
    warmup: frozenset[int]

    @staticmethod
    def from_spec(spec: Mapping[str, Any]) -> MemberTarget:
        """Parse the spec the operator wrote."""
        return MemberTarget(
            generation=int(spec.get("generation") or 0),
            active={int(t["task"]): int(t["epoch"]) for t in spec.get("active") or []},
            revoking={int(t["task"]): int(t["epoch"]) for t in spec.get("revoking") or []},
            standby=frozenset(int(t) for t in spec.get("standby") or []),
            warmup=frozenset(int(t) for t in spec.get("warmup") or []),
        )


@dataclass(frozen=True)
class TaskReport:
    """One task as this member holds it; `inputLag` only for an active task whose data plane measures
    it, `storeEpoch` when the data plane reads the shared store, `fencedBy` only for an active task the
    store fences (each left out of the status when None)."""

    task: int
    role: str
    epoch: int
    appliedSeq: int
    appliedOffset: int
    lag: int
    inputLag: int | None = None
    storeEpoch: int | None = None
    fencedBy: int | None = None


class DataPlane(Protocol):
    """What runs the tasks: the PySpark runtime in production, a simulation in tests and demos."""

    def apply(self, target: MemberTarget) -> None:
        """Make it so; revoked tasks must be committed and stopped when this returns."""

    def reports(self) -> list[TaskReport]:
        """Current per-task progress."""


@dataclass
class SimulatedDataPlane:
    """A data plane that only simulates restore progress: copies catch up at `restore_rate` records/s.

    `lags` is the member's local state (task → records behind); pass the same dict to a restarted
    member to model a state volume that survived its pod.
    """

    restore_rate: float
    state_records: int
    lags: dict[int, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    _target: MemberTarget | None = None
    _last: float | None = None

    def apply(self, target: MemberTarget) -> None:
        self._advance()
        self._target = target
        for task in (*target.active, *target.standby, *target.warmup):
            self.lags.setdefault(task, float(self.state_records))

    def reports(self) -> list[TaskReport]:
        self._advance()
        target = self._target
        if target is None:
            return []
        rows = [TaskReport(t, "active", e, 0, 0, 0) for t, e in sorted(target.active.items())]
        rows += [TaskReport(t, "revoking", e, 0, 0, 0) for t, e in sorted(target.revoking.items())]
        for role, tasks in (("standby", target.standby), ("warmup", target.warmup)):
            rows += [TaskReport(t, role, 0, 0, 0, round(self.lags.get(t, 0.0))) for t in sorted(tasks)]
        return rows

    def _advance(self) -> None:
        now = self.clock()
        elapsed = 0.0 if self._last is None else now - self._last
        self._last = now
        target = self._target
        if target is None:
            return
        for task in target.active:
            self.lags[task] = 0.0
        for task in (*target.standby, *target.warmup):
            self.lags[task] = max(
                0.0, self.lags.get(task, float(self.state_records)) - self.restore_rate * elapsed
            )


class MembershipClient:
    """Follows one member's StreamAppMember until stopped."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        app: str,
        member: int,
        pod_uid: str,
        data_plane: DataPlane,
        report_interval: float = 2.0,
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.name = member_name(app, member)
        self.pod_uid = pod_uid
        self.data_plane = data_plane
        self.report_interval = report_interval
        self.applied = 0
        self._reported: list[dict[str, Any]] | None = None
        self._next_report = 0.0
        self._specs: queue.Queue[Mapping[str, Any]] = queue.Queue()

    def run(self, stop: threading.Event) -> None:
        """Watch, apply, acknowledge and report until `stop` is set."""
        watcher = threading.Thread(target=self._watch, args=(stop,), name=f"watch {self.name}", daemon=True)
        watcher.start()
        while not stop.is_set():
            try:
                spec = self._specs.get(timeout=min(0.5, self.report_interval))
            except queue.Empty:
                spec = None
            try:
                if spec is not None:
                    self.follow(spec)
                self.report()
            except ApiException as error:
                log.warning("%s: API error %s %s; retrying", self.name, error.status, error.reason)

    def follow(self, spec: Mapping[str, Any]) -> None:
        """Apply a newer target, then acknowledge it (the acknowledgement is what releases revocations)."""
        target = MemberTarget.from_spec(spec)
        if target.generation <= self.applied and self.applied:
            return
        self.data_plane.apply(target)
        self.applied = target.generation
        self.report(force=True)

    def report(self, force: bool = False) -> None:
        """Write status when it changed and the interval allows (always for an acknowledgement)."""
        now = time.monotonic()
        tasks = [{k: v for k, v in asdict(r).items() if v is not None} for r in self.data_plane.reports()]
        if not force and (now < self._next_report or tasks == self._reported):
            return
        status = {
            "observedGeneration": self.applied,
            "podUID": self.pod_uid,
            "reportedAt": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tasks": tasks,
        }
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, MEMBERS, self.name, {"status": status}
        )
        self._reported = tasks
        self._next_report = now + self.report_interval

    def _watch(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                stream = watch.Watch().stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    MEMBERS,
                    field_selector=f"metadata.name={self.name}",
                    timeout_seconds=5,
                )
                for event in stream:
                    if stop.is_set():
                        return
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._specs.put(event["object"].get("spec") or {})
            except ApiException as error:
                log.warning("%s: watch failed (%s); retrying", self.name, error.reason)
                stop.wait(1.0)
