"""Executors for operator tests: one real membership client per Ready member pod, in this process.

Member pods run on kwok nodes, where nothing executes; the fleet plays their executors with the
real `MembershipClient` and a simulated data plane, so the real coordination code runs against the
real API server. Given the app's played input (`playedinput.PlayedInput`), the members process it at a
set rate and report what the operator's autoscaler measures; the test may hold copies back and let
them catch up (`Fleet.restore_at`). A member's simulated state survives its pod (like a state volume). Every apply is
checked, under one lock, for the two things the protocol promises: no task active on two members at
once, and no task taken from its owner unless some other member holds a caught-up copy.

"At once" is judged by the API server's own order, not by when this process happens to notice a pod
go: an executor runs exactly while its pod is Ready and not deleted, and a task may be active on a
new member while an old one still holds it only if the old one's pod had ended at a resourceVersion
no later than that of the target which made the task active on the new one (the operator may hand a
task over once the old owner's pod is gone). Pods are watched, so each one's end has its
resourceVersion; a double ownership whose order the watch has not reached yet is decided once it has.
Polling pods instead made the checks count a deleted member as running until the next poll, and a
loaded machine (load 10-13) let the engine restore its tasks elsewhere first.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, watch

from playedinput import PlayedInput
from simulatedplane import SimulatedDataPlane
from streamapp.api.member import StreamAppMemberSpec
from streamapp.api.names import APP_LABEL, GROUP, MEMBERS, VERSION
from streamapp.executor.membership import MembershipClient

RESOLVE_SECONDS = 120.0
"""How long `Fleet.violations` waits for the pod watch to reach the order of a suspected double owner."""


@dataclass
class Violations:
    """What the checks found (tests assert it stays empty)."""

    double_owned: list[str] = field(default_factory=list)
    cold_handoffs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Suspect:
    """`task` active on `member` from the target written at `since` while `other`, running in pod
    `uid`, still applied a target with it active: a double owner unless that pod ended by `since`."""

    task: int
    member: int
    since: int
    other: int
    uid: str


class CheckedDataPlane(SimulatedDataPlane):
    """A simulated data plane whose applies are checked against the whole fleet.

    Letting go of a task takes `REVOKE_SECONDS` (finishing the batch and committing), as it does in a
    real executor: an engine that handed a task over before the old owner acknowledged would have
    two members process it during that pause, and the check would see it.
    """

    REVOKE_SECONDS = 0.5
    fleet: Fleet
    member: int
    uid: str
    # the resourceVersion of the StreamAppMember the next `apply` comes from (`CheckedClient`), and
    # per active task that of the target which made it active here
    version = 0
    active_since: dict[int, int]

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
            self.active_since = {
                task: self.active_since.get(task, self.version) for task in target.active_epochs()
            }
            super().apply(target)
            self.fleet.check(self.member, before, target)


class CheckedClient(MembershipClient):
    """The real membership client, telling its data plane which version of the StreamAppMember each
    target it applies comes from (a watch event's is the version that wrote it)."""

    plane: CheckedDataPlane

    def notice(self, body: Mapping[str, Any]) -> None:
        self.plane.version = int((body.get("metadata") or {}).get("resourceVersion") or 0)
        super().notice(body)


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
        played_input: PlayedInput | None = None,
        processing_rate: float = 0.0,
    ) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.namespace = namespace
        self.app = app
        self.restore_rate = restore_rate
        self.state_records = state_records
        self.acceptable_lag = acceptable_lag
        self.played_input = played_input
        self.processing_rate = processing_rate
        self.lock = threading.RLock()
        self._violations = Violations()
        self.suspects: list[Suspect] = []
        # tasks judged handed on after their old owner's pod had ended (the check's allowed case)
        self.handed_on: set[int] = set()
        # pod uid → the resourceVersion at which it stopped being Ready and not deleted; the newest
        # resourceVersion the pod watch has delivered (events and bookmarks: all before it are seen)
        self.ended: dict[str, int] = {}
        self.seen = 0
        self.live: dict[str, Any] = {}
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

    @property
    def violations(self) -> Violations:
        """What the checks found, every suspected double owner decided first."""
        deadline = time.monotonic() + RESOLVE_SECONDS
        while True:
            with self.lock:
                self._resolve()
                if not self.suspects:
                    return self._violations
                # the watch cannot reach a version once it has stopped (after the `with`): decide now
                if time.monotonic() > deadline or not self._thread.is_alive():
                    for suspect in self.suspects:
                        self._violations.double_owned.append(
                            f"task {suspect.task} active on {suspect.member} since version {suspect.since} "
                            f"while member {suspect.other} ran it; its pod's end never seen "
                            f"(watch at {self.seen})"
                        )
                    self.suspects.clear()
                    return self._violations
            time.sleep(0.2)

    def check(self, member: int, before: StreamAppMemberSpec | None, after: StreamAppMemberSpec) -> None:
        """Called with the lock held after `member` applied `after`."""
        owners: dict[int, list[int]] = {}
        for other, plane in self.planes.items():
            if plane._target is not None:
                for task in plane._target.active_epochs():
                    owners.setdefault(task, []).append(other)
        for task, who in owners.items():
            for first, second in itertools.combinations(who, 2):
                # the later of two to take a task must have taken it after the other's pod had ended
                earlier, later = sorted(
                    (first, second), key=lambda m: self.planes[m].active_since.get(task, 0)
                )
                since = self.planes[later].active_since.get(task, 0)
                suspect = Suspect(task, later, since, earlier, self.planes[earlier].uid)
                if suspect not in self.suspects:
                    self.suspects.append(suspect)
        self._resolve()
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
                self._violations.cold_handoffs.append(
                    f"task {task} revoked from {member} with no caught-up copy"
                )

    def _resolve(self) -> None:
        """Decide every suspect the pod watch has reached (lock held): a double owner unless the
        earlier owner's pod had ended by the version of the target that made the later one active."""
        pending = []
        for suspect in self.suspects:
            end = self.ended.get(suspect.uid)
            if end is not None and end <= suspect.since:
                self.handed_on.add(suspect.task)  # the old owner's pod was gone first: allowed
                continue
            if end is None and self.seen < suspect.since:
                pending.append(suspect)  # the watch has not reached that version yet
                continue
            self._violations.double_owned.append(
                f"task {suspect.task} active on [{suspect.other}, {suspect.member}]: member "
                f"{suspect.member} took it at version {suspect.since}, member {suspect.other}'s pod "
                + ("still ran" if end is None else f"ended only at version {end}")
            )
        self.suspects = pending

    def restore_at(self, rate: float) -> None:
        """Every member's copies catch up at `rate` records a second from now on, members started later
        too (0 holds them where they are)."""
        with self.lock:
            self.restore_rate = rate
            for plane in self.planes.values():
                plane.set_restore_rate(rate)

    def targets(self) -> dict[int, StreamAppMemberSpec]:
        """What each running member is applying now."""
        with self.lock:
            return {
                m: p._target for m, p in self.planes.items() if p._target is not None and m in self.running
            }

    def _supervise(self) -> None:
        """Keep one executor per Ready member pod, following a watch of the app's pods (list, then
        watch from the listed version; bookmarks advance `seen` while nothing changes). While the API
        server is away the executors keep running as they are (like a kubelet that cannot reach it)."""
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
            except Exception:  # the API server restarting, paused or gone: list again shortly
                version = None
                self._stop.wait(1.0)

    def _list(self) -> str:
        listed = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"{APP_LABEL}={self.app}", _request_timeout=(5, 15)
        )
        at = int(listed.metadata.resource_version)
        listed_uids = {p.metadata.uid for p in listed.items}
        with self.lock:
            # a pod that went while the watch was down ended no later than this listing
            for uid, pod in list(self.live.items()):
                if uid not in listed_uids:
                    self._observe(pod, at, deleted=True)
            for pod in listed.items:
                self._observe(pod, at, deleted=False)
            self.seen = max(self.seen, at)
        self._follow_pods()
        return str(listed.metadata.resource_version)

    def _watch(self, version: str) -> str | None:
        """One watch from `version` until the server ends it (10 s); the version to go on from, or
        None to list again (410 Gone)."""
        stream = watch.Watch()
        try:
            for event in stream.stream(
                self.core.list_namespaced_pod,
                self.namespace,
                label_selector=f"{APP_LABEL}={self.app}",
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=10,
                _request_timeout=(5, 25),
            ):
                if self._stop.is_set():
                    break
                kind, pod = event["type"], event["object"]
                if kind == "ERROR":
                    return None
                if kind == "BOOKMARK":  # the client leaves a bookmark's object a plain dict
                    version = str(event["raw_object"]["metadata"]["resourceVersion"])
                else:
                    version = pod.metadata.resource_version
                with self.lock:
                    if kind != "BOOKMARK":
                        self._observe(pod, int(version), deleted=kind == "DELETED")
                    self.seen = max(self.seen, int(version))
                    self._resolve()
                self._follow_pods()
        finally:
            stream.stop()
        return version

    def _observe(self, pod: Any, at: int, deleted: bool) -> None:
        """Record a pod as seen at version `at` (lock held). A pod is live while Ready and not deleted;
        the first version at which a live pod is no longer live is its end."""
        uid = pod.metadata.uid
        live = (
            not deleted
            and pod.metadata.deletion_timestamp is None
            and any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))
        )
        if live and uid not in self.ended:
            self.live[uid] = pod
        elif uid in self.live:
            del self.live[uid]
            self.ended[uid] = at

    def _follow_pods(self) -> None:
        """Start an executor for each Ready member pod, halt those whose pod has ended."""
        with self.lock:
            ready = {int(p.metadata.labels["streamapp.dev/member"]): uid for uid, p in self.live.items()}
        for member, (uid, stop, thread) in list(self.running.items()):
            if ready.get(member) != uid:
                self._halt(member, stop, thread)
        for member, uid in ready.items():
            if member not in self.running:
                self._start(member, uid)

    def _start(self, member: int, uid: str) -> None:
        with self.lock:  # the restore rate as `restore_at` last set it
            plane = CheckedDataPlane(
                self.restore_rate,
                self.state_records,
                self.states.setdefault(member, {}),
                input=self.played_input,
                processing_rate=self.processing_rate,
            )
            plane.fleet, plane.member, plane.uid, plane.active_since = self, member, uid, {}
            self.planes[member] = plane
        membership = CheckedClient(
            self.api, self.namespace, self.app, member, uid, plane, report_interval=0.5
        )
        membership.plane = plane
        self.clients[member] = membership
        stop = threading.Event()
        thread = threading.Thread(target=membership.run, args=(stop,), name=f"member {member}", daemon=True)
        self.running[member] = (uid, stop, thread)
        thread.start()

    def _halt(self, member: int, stop: threading.Event, thread: threading.Thread) -> None:
        """The pod has ended: its executor stops processing, as a killed process does (the checks
        judge by the pod's end, not by this); its thread (which may be mid-call) is joined after."""
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
