"""The executors of a large app played from one process, for measuring the operator at scale.

Member pods sit on kwok nodes (Ready, running nothing). :class:`PlayedMembers` follows every
StreamAppMember of one app with a single watch and writes each Ready member's report with the
executor's own models, from a few threads, on the executors' own schedule: a new target is
acknowledged at once; a member with a copy still catching up reports every `decisive_interval`
seconds (an executor reports a copy becoming caught up within 2 s); every other member reports again
every `interval` seconds (the executors' progress interval, 10 s), each time with every active task's
input lag changed, so every report is news to the operator. Reports are jittered ±10% so they spread
out. Warmups and standbys catch up at `restore_rate` (the simulated data plane of the operator tests). tests/integration/fleet.py runs
one real membership client per member instead, which is what a protocol test wants; at a thousand
members that is a thousand threads and watches, so a measurement of the operator uses this.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from simulatedplane import SimulatedDataPlane
from streamapp.api.member import StreamAppMemberSpec, StreamAppMemberStatus
from streamapp.api.names import APP_LABEL, APPS, GROUP, MEMBER_LABEL, MEMBERS, VERSION, member_name

STATE_RECORDS = 20_000


@dataclass
class Played:
    """One member's executor as played here."""

    plane: SimulatedDataPlane
    applied: int = 0
    due: float = 0.0


@dataclass
class Counters:
    """What was written, and how often the app object changed (seen by a watch on it)."""

    reports: int = 0
    failed: int = 0
    app_writes: int = 0


class PlayedMembers:
    """Plays every member of `app` in `namespace` while entered (see the module docstring)."""

    def __init__(
        self,
        kubeconfig: Path,
        namespace: str,
        app: str,
        interval: float = 10.0,
        restore_rate: float = 10_000.0,
        workers: int = 8,
        decisive_interval: float = 2.0,
    ) -> None:
        self.kubeconfig, self.namespace, self.app = kubeconfig, namespace, app
        self.interval, self.restore_rate, self.workers = interval, restore_rate, workers
        self.decisive_interval = decisive_interval
        self.members: dict[int, Played] = {}
        self.uids: dict[int, str] = {}
        self.lock = threading.Lock()
        self.counters = Counters()
        self.rng = random.Random(7)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def __enter__(self) -> PlayedMembers:
        jobs: list[tuple[str, Callable[[], None]]] = [("targets", self._follow), ("pods", self._pods)]
        jobs += [(f"reports-{w}", self._reporter(w)) for w in range(self.workers)]
        jobs.append(("app", self._count_app_writes))
        for name, job in jobs:
            thread = threading.Thread(target=job, name=name, daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=10)

    def pace(self, interval: float) -> None:
        """Report every `interval` seconds from now on, each member's next report placed at random
        within the first interval: every member was due within the old one, and a longer interval
        with only ±10% jitter would have them all report in one burst per interval (a measurement of
        a report rate then sees bursts and idle spells, not the rate)."""
        now = time.monotonic()
        with self.lock:
            self.interval = interval
            for played in self.members.values():
                played.due = now + interval * self.rng.random()

    def _follow(self) -> None:
        """Apply each member's newer target and make its report due at once (the acknowledgement)."""
        custom = client.CustomObjectsApi(api_client(self.kubeconfig))
        lister = custom.list_namespaced_custom_object
        for event in watch_forever(self.stop, lister, GROUP, VERSION, self.namespace, MEMBERS):
            spec = event["object"].get("spec") or {}
            if spec.get("app") != self.app:
                continue
            member = int(spec.get("memberId", -1))
            with self.lock:
                if event["type"] == "DELETED":
                    self.members.pop(member, None)
                    continue
                played = self.members.setdefault(
                    member, Played(SimulatedDataPlane(self.restore_rate, STATE_RECORDS))
                )
                if int(spec.get("generation", 0)) > played.applied:
                    target = StreamAppMemberSpec.from_dict(spec)
                    played.plane.apply(target)
                    played.applied = target.generation
                    played.due = 0.0

    def _pods(self) -> None:
        """Which members have a Ready pod, and its UID (a report names the pod that made it)."""
        core = client.CoreV1Api(api_client(self.kubeconfig))
        while not self.stop.is_set():
            try:
                pods = core.list_namespaced_pod(
                    self.namespace, label_selector=f"{APP_LABEL}={self.app}"
                ).items
            except Exception:  # a slow or busy API server: look again
                self.stop.wait(2.0)
                continue
            ready = {
                int(p.metadata.labels[MEMBER_LABEL]): p.metadata.uid
                for p in pods
                if any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
            }
            with self.lock:
                self.uids = ready
            self.stop.wait(10.0)  # pods change rarely here; a listing of 1,000 pods is not free

    def _reporter(self, worker: int) -> Callable[[], None]:
        """The loop of one writer thread: the members whose id is `worker` modulo the thread count."""

        def loop() -> None:
            custom = client.CustomObjectsApi(api_client(self.kubeconfig))
            while not self.stop.is_set():
                now = time.monotonic()
                with self.lock:
                    mine = [
                        (p.due, m)
                        for m, p in self.members.items()
                        if m % self.workers == worker and m in self.uids
                    ]
                    due, member = min(mine, default=(now + 0.5, -1))
                    body = self._body(member, now) if due <= now else None
                if body is None:
                    self.stop.wait(min(max(due - now, 0.01), 0.5))
                    continue
                try:
                    custom.patch_namespaced_custom_object_status(
                        GROUP,
                        VERSION,
                        self.namespace,
                        MEMBERS,
                        member_name(self.app, member),
                        body,
                        _request_timeout=(5, 30),
                    )
                    self.counters.reports += 1
                except Exception:  # counted; the member reports again on its next turn
                    self.counters.failed += 1

        return loop

    def _body(self, member: int, now: float) -> dict[str, Any]:
        """The member's report as its executor writes it (called with the lock held)."""
        played = self.members[member]
        rows = tuple(
            replace(row, input_lag=self.rng.randrange(1_000)) if row.role == "active" else row
            for row in played.plane.reports()
        )
        catching_up = any(row.role != "active" and (row.lag or 0) > 0 for row in rows)
        interval = self.decisive_interval if catching_up else self.interval
        played.due = now + interval * (0.9 + 0.2 * self.rng.random())
        status = StreamAppMemberStatus(
            observed_generation=played.applied,
            pod_uid=self.uids[member],
            reported_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            tasks=rows,
        )
        return status.merge_patch()

    def _count_app_writes(self) -> None:
        custom = client.CustomObjectsApi(api_client(self.kubeconfig))
        lister = custom.list_namespaced_custom_object
        for event in watch_forever(self.stop, lister, GROUP, VERSION, self.namespace, APPS):
            if event["type"] == "MODIFIED" and event["object"]["metadata"]["name"] == self.app:
                self.counters.app_writes += 1


def unsettled(custom: client.CustomObjectsApi, namespace: str, app: str) -> str | None:
    """What the app still waits for before every task is active on a Ready member, the members are
    balanced (active tasks per member differ by at most one) and every member has acknowledged its
    target; None once all of that holds."""
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, app)
    partitions, replicas = body["spec"]["partitions"], body["spec"]["replicas"]
    status = body.get("status") or {}
    tasks = status.get("tasks") or {}
    if tasks.get("active") != partitions or tasks.get("warming") or tasks.get("revoking"):
        return f"tasks {tasks}"
    if status.get("readyReplicas") != replicas:
        return f"readyReplicas {status.get('readyReplicas')} of {replicas}"
    items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)["items"]
    mine = [i for i in items if i["spec"].get("app") == app]
    behind = [
        i for i in mine if (i.get("status") or {}).get("observedGeneration") != i["spec"].get("generation")
    ]
    if behind:
        return f"{len(behind)} members have not acknowledged their target"
    counts = [len(i["spec"].get("active") or ()) for i in mine]
    if len(counts) != replicas or max(counts) - min(counts) > 1:
        return f"{min(counts, default=0)} to {max(counts, default=0)} active tasks on {len(counts)} members"
    return None


def object_sizes(custom: client.CustomObjectsApi, namespace: str, app: str) -> tuple[int, int]:
    """Bytes of the app and of its largest StreamAppMember as the API server sends them."""
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, app, _preload_content=False)
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, _preload_content=False)
    items = [i for i in json.loads(listed.data)["items"] if i["spec"].get("app") == app]
    return len(body.data), max((len(json.dumps(i, separators=(",", ":"))) for i in items), default=0)


def watch_forever(stop: threading.Event, lister: Callable[..., Any], *args: Any) -> Iterator[dict[str, Any]]:
    """Every event of a watch, resumed from the last version seen whenever the server ends it, and
    started again from the current state (every object again) only when it fails: at 1,000 members of
    ~35 kB, starting afresh every minute sent the whole app again to a busy API server."""
    version: str | None = None
    while not stop.is_set():
        watcher = watch.Watch()
        try:
            for event in watcher.stream(lister, *args, timeout_seconds=60, resource_version=version):
                yield event
                if stop.is_set():
                    return
            version = watcher.resource_version
        except Exception:  # an expired version or a busy API server: start from the current state
            version = None
            stop.wait(1.0)


def api_client(kubeconfig: Path) -> client.ApiClient:
    """A client whose connection pool is as wide as the threads that share it."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 32
    return client.ApiClient(configuration)
