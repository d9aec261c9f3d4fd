"""Executors for operator tests: one real membership client per Ready member pod, in this process.

Member pods run on kwok nodes, where nothing executes; the fleet plays their executors with the
real `MembershipClient` and a simulated data plane, so the real coordination code runs against the
real API server. A member's simulated state survives its pod (like a state volume). Every apply is
checked, under one lock, for the two things the protocol promises: no task active on two members at
once, and no task taken from its owner unless some other member holds a caught-up copy.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from streamapp.api.member import StreamAppMemberSpec
from streamapp.api.names import APP_LABEL, GROUP, MEMBERS, VERSION
from streamapp.executor.membership import MembershipClient, SimulatedDataPlane


@dataclass
class Violations:
    """What the checks found (tests assert it stays empty)."""

    double_owned: list[str] = field(default_factory=list)
    cold_handoffs: list[str] = field(default_factory=list)


class CheckedDataPlane(SimulatedDataPlane):
    """A simulated data plane whose applies are checked against the whole fleet.

    Letting go of a task takes `REVOKE_SECONDS` (finishing the batch and committing), as it does in a
    real executor: an engine that handed a task over before the old owner acknowledged would have
    two members process it during that pause, and the check would see it.
    """

    REVOKE_SECONDS = 0.5
    fleet: Fleet
    member: int

    def apply(self, target: StreamAppMemberSpec) -> None:
        current = self._target
        if current is not None and set(current.active_epochs()) - set(target.active_epochs()):
            time.sleep(self.REVOKE_SECONDS)
        with self.fleet.lock:
            before = self._target
            started = set(target.active_epochs()) - set(before.active_epochs() if before else ())
            for task in sorted(started):
                lag = self.lags.get(task)
                self.fleet.takeovers.append((task, self.member, None if lag is None else round(lag)))
            super().apply(target)
            self.fleet.check(self.member, before, target)


class Fleet:
    """Runs and checks the executors of one app until stopped."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        app: str,
        restore_rate: float = 10_000.0,
        state_records: int = 20_000,
        acceptable_lag: int = 10_000,
    ) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.app = app
        self.restore_rate = restore_rate
        self.state_records = state_records
        self.acceptable_lag = acceptable_lag
        self.lock = threading.RLock()
        self.violations = Violations()
        self.takeovers: list[tuple[int, int, int | None]] = []
        self.planes: dict[int, CheckedDataPlane] = {}
        self.states: dict[int, dict[int, float]] = {}
        self.running: dict[int, tuple[str, threading.Event, threading.Thread]] = {}
        self.clients: dict[int, MembershipClient] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name=f"fleet {app}", daemon=True)

    def __enter__(self) -> Fleet:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        for _uid, stop, thread in self.running.values():
            stop.set()
            thread.join()

    def check(self, member: int, before: StreamAppMemberSpec | None, after: StreamAppMemberSpec) -> None:
        """Called with the lock held after `member` applied `after`."""
        owners: dict[int, list[int]] = {}
        for other, plane in self.planes.items():
            target = plane._target
            if target is not None and other in self.running:
                for task in target.active_epochs():
                    owners.setdefault(task, []).append(other)
        for task, who in owners.items():
            if len(who) > 1:
                self.violations.double_owned.append(
                    f"task {task} active on {who} after member {member} applied"
                )
        if before is None:
            return
        for task in set(before.active_epochs()) & set(after.revoking_epochs()):
            warm = [
                m
                for m, plane in self.planes.items()
                if m != member
                and m in self.running
                and plane._target is not None
                and task in (*plane._target.standby, *plane._target.warmup)
                and plane.lags.get(task, float("inf")) <= self.acceptable_lag
            ]
            if not warm:
                self.violations.cold_handoffs.append(
                    f"task {task} revoked from {member} with no caught-up copy"
                )

    def targets(self) -> dict[int, StreamAppMemberSpec]:
        """What each running member is applying now."""
        with self.lock:
            return {
                m: p._target for m, p in self.planes.items() if p._target is not None and m in self.running
            }

    def _supervise(self) -> None:
        """Keep one executor per Ready member pod. While the API server is away, the executors keep
        running as they are (like a kubelet that cannot reach it)."""
        while not self._stop.is_set():
            try:
                pods = self.core.list_namespaced_pod(
                    self.namespace, label_selector=f"{APP_LABEL}={self.app}", _request_timeout=(5, 15)
                ).items
            except Exception:  # the API server restarting, paused or gone: look again shortly
                self._stop.wait(1.0)
                continue
            ready = {
                int(p.metadata.labels["streamapp.dev/member"]): p.metadata.uid
                for p in pods
                if p.metadata.deletion_timestamp is None
                and any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
            }
            for member, (uid, stop, thread) in list(self.running.items()):
                if ready.get(member) != uid:
                    self._halt(member, stop, thread)
            for member, uid in ready.items():
                if member not in self.running:
                    self._start(member, uid)
            self._stop.wait(0.2)

    def _start(self, member: int, uid: str) -> None:
        plane = CheckedDataPlane(self.restore_rate, self.state_records, self.states.setdefault(member, {}))
        plane.fleet = self
        plane.member = member
        with self.lock:
            self.planes[member] = plane
        membership = MembershipClient(
            self.api, self.namespace, self.app, member, uid, plane, report_interval=0.5
        )
        self.clients[member] = membership
        stop = threading.Event()
        thread = threading.Thread(target=membership.run, args=(stop,), name=f"member {member}", daemon=True)
        self.running[member] = (uid, stop, thread)
        thread.start()

    def _halt(self, member: int, stop: threading.Event, thread: threading.Thread) -> None:
        """The pod is gone: its executor stops processing at once, as a killed process does, so the
        checks stop counting it now; its thread (which may be mid-call for a while) is joined after.
        Counting it until the join made the checks see a lost member's tasks on two members whenever
        the engine restored them elsewhere quicker than the thread ended (220 ms in one run)."""
        stop.set()
        with self.lock:
            self.running.pop(member, None)
        thread.join()


def member_statuses(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    """Every StreamAppMember of the namespace."""
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)[
        "items"
    ]
    return list(items)
