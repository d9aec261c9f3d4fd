"""One reconcile loop per app, woken by watch events or by the engine's next deadline.

kopf daemons and timers would put a finalizer on every StreamApp, and a finalizer whose operator
is down blocks namespace deletion (kopf #1088). These loops need none: they are plain asyncio tasks
started and stopped from watch events, and ownerReferences clean up children. A loop keeps the
StreamApp as it last wrote it, so it never plans from a watch event older than its own status write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from streamapp.controller import backoff
from streamapp.controller.admission import STRICT, PodPolicy
from streamapp.controller.conflicts import Streak, conflicting_object
from streamapp.controller.health import Health
from streamapp.controller.kube import Kube, server_message
from streamapp.controller.memo import Memo
from streamapp.controller.metrics import Metrics
from streamapp.controller.observe import Observed
from streamapp.controller.reconcile import Outcome, reconcile, report_failure

log = logging.getLogger(__name__)
Key = tuple[str, str]
Body = Mapping[str, Any]

RESYNC_SECONDS = 30.0
DEBOUNCE_SECONDS = 0.05
# Reports coalesce: whatever wakes a loop (1,000 members reporting every 2 s is 500 wakes a second)
# sets one flag, and the next reconcile starts no sooner than this after the previous one started, so
# one reconcile covers every report since. It bounds the operator's CPU per app at (reconcile time /
# interval) and delays a reaction (a lost member, a deadline) by at most this.
MIN_RECONCILE_INTERVAL_SECONDS = 1.0
# And no sooner than the CPU time the last reconcile used, again: a reconcile of a large app (seconds of
# CPU at 100,000 tasks, bench/results/scale.md) then keeps its loop under half a core, whatever the size.
# CPU, not wall time: a reconcile that waits on a busy API server costs the operator nothing meanwhile,
# and spacing by its wall time slowed a scale-out of 10,000 tasks to one round per ~30 s.
BUSY_FRACTION = 0.5
# What cannot wait for the interval: an acknowledgement (a task revoked on its owner waits, standing
# still, for the reconcile that assigns it on), a member pod gone or back (its tasks wait for the
# failover). Such a wake starts the next reconcile this soon after the last one started (and no sooner
# than twice its CPU time, as above); they are rare beside reports: one per member per generation.
URGENT_MIN_INTERVAL_SECONDS = 0.1
# A loop whose reconcile keeps failing (the API server away) tries again within this; any watch event
# (the API server back, the app scaled) wakes it at once anyway.
MAX_BACKOFF_SECONDS = 10.0
FAILURES_BEFORE_REPORT = 3
CONFLICT_RETRY_SECONDS = 0.2


@dataclass
class Sources:
    """Where a loop reads its children: kopf's watch-fed indices, looked up by (namespace, app)."""

    pods: Callable[[Key], Iterable[Body]]
    members: Callable[[Key], Iterable[Body]]
    zones: Callable[[], Mapping[str, str]]
    supporting: Callable[[Key], Iterable[Body]]


@dataclass
class AppLoops:
    """The running loops, keyed by (namespace, name)."""

    kube: Kube
    metrics: Metrics
    policy: PodPolicy = STRICT
    clock: Callable[[], float] = time.time
    min_interval: float = MIN_RECONCILE_INTERVAL_SECONDS
    step: Callable[[Kube, Observed, float, Metrics, PodPolicy, Memo], Outcome] = reconcile
    health: Health = field(default_factory=Health)
    apps: dict[Key, Body] = field(default_factory=dict)
    memos: dict[Key, Memo] = field(default_factory=dict)
    wakeups: dict[Key, asyncio.Event] = field(default_factory=dict)
    urgent: dict[Key, asyncio.Event] = field(default_factory=dict)
    tasks: dict[Key, asyncio.Task[None]] = field(default_factory=dict)

    def upsert(self, key: Key, body: Body, sources: Sources) -> None:
        """Record the app as the watch saw it (unless ours is newer) and make sure its loop runs."""
        if _newer_or_same(self.apps.get(key), body):
            self.apps[key] = body
        if key not in self.tasks:
            self.wakeups[key] = asyncio.Event()
            self.urgent[key] = asyncio.Event()
            self.tasks[key] = asyncio.create_task(
                self._run(key, sources), name=f"streamapp {key[0]}/{key[1]}"
            )
        self.wake(key)

    def wake(self, key: Key, urgent: bool = False) -> None:
        """Something about the app or its children changed: reconcile soon (one reconcile for every
        wake since the last one started: the flag is set, not counted); `urgent`: without waiting out
        the interval (see `URGENT_MIN_INTERVAL_SECONDS`)."""
        for flags, wanted in ((self.wakeups, True), (self.urgent, urgent)):
            event = flags.get(key)
            if wanted and event is not None:
                event.set()

    async def stop(self, key: Key) -> None:
        """The app is gone (or this replica stopped leading): stop its loop and drop its metrics."""
        self.metrics.forget({"namespace": key[0], "app": key[1]})
        task = self.tasks.pop(key, None)
        self.apps.pop(key, None)
        self.wakeups.pop(key, None)
        self.urgent.pop(key, None)
        self.memos.pop(key, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stop_all(self) -> None:
        """Stop every loop (losing leadership, shutting down)."""
        for key in list(self.tasks):
            await self.stop(key)

    async def _run(self, key: Key, sources: Sources) -> None:
        failures = 0
        conflicts = Streak()
        while True:
            wakeup, urgent = self.wakeups[key], self.urgent[key]
            wakeup.clear()
            urgent.clear()
            observed = Observed(
                app=self.apps[key],
                pods=tuple(sources.pods(key)),
                members=tuple(sources.members(key)),
                zones=sources.zones(),
                supporting=tuple(sources.supporting(key)),
            )
            started, cpu = time.monotonic(), 0.0
            try:
                memo = self.memos.setdefault(key, Memo())
                self.health.started(key)
                try:
                    outcome, cpu = await asyncio.to_thread(
                        _on_cpu, self.step, self.kube, observed, self.clock(), self.metrics, self.policy, memo
                    )
                finally:
                    self.health.ended(key)
                failures = 0
                conflicts.ended()
            except ApiException as error:
                if error.status == 409:  # the app changed since the plan was made: plan again on it
                    retry_at = self.clock() + CONFLICT_RETRY_SECONDS
                    outcome = Outcome(retry_at, None)
                    if conflicts.conflicted(conflicting_object(error.body)):
                        outcome = await self._report(key, conflicts.message(server_message(error)), retry_at)
                else:
                    failures += 1
                    log.warning("reconcile of %s/%s failed (%s %s)", *key, error.status, error.reason)
                    outcome = await self._failed(
                        key, failures, f"{error.status} {error.reason}: {server_message(error)}"
                    )
            except Exception as error:
                failures += 1
                log.exception("reconcile of %s/%s failed; retrying", *key)
                outcome = await self._failed(key, failures, f"{type(error).__name__}: {error}")
            if outcome.app is not None and _newer_or_same(self.apps.get(key), outcome.app):
                self.apps[key] = outcome.app
            spacing = self._spacing(cpu)
            await self._sleep(wakeup, urgent, outcome.wake_at, started + spacing[0], started + spacing[1])

    async def _failed(self, key: Key, failures: int, error: str) -> Outcome:
        """Retry with exponential back-off; once failures persist, say so in status and an Event
        (a transient API error resolves itself; a refused write would otherwise fail unseen)."""
        retry_at = self.clock() + backoff.delay(failures, 1.0, MAX_BACKOFF_SECONDS)
        if failures < FAILURES_BEFORE_REPORT:
            return Outcome(retry_at, None)
        return await self._report(key, error, retry_at)

    async def _report(self, key: Key, error: str, retry_at: float) -> Outcome:
        """Show a reconcile that keeps failing (`report_failure`), and try again at `retry_at`."""
        try:
            written = await asyncio.to_thread(report_failure, self.kube, self.apps[key], error, self.clock())
        except Exception as reporting:
            log.warning("could not report the failing reconcile of %s/%s: %s", *key, reporting)
            written = None
        return Outcome(retry_at, written)

    def _spacing(self, cpu: float) -> tuple[float, float]:
        """Seconds from one reconcile's start to the next one's at the earliest, after it used `cpu`:
        for any wake, and for an urgent one."""
        busy = cpu / BUSY_FRACTION
        return max(self.min_interval, busy), max(min(self.min_interval, URGENT_MIN_INTERVAL_SECONDS), busy)

    async def _sleep(
        self,
        wakeup: asyncio.Event,
        urgent: asyncio.Event,
        wake_at: float | None,
        earliest: float,
        earliest_urgent: float,
    ) -> None:
        """Until woken or `wake_at`, then until `earliest` (monotonic) at least — or only until
        `earliest_urgent` once an urgent wake comes: wakes meanwhile only keep the flag set, so one
        reconcile covers them all."""
        timeout = RESYNC_SECONDS if wake_at is None else min(RESYNC_SECONDS, max(0.0, wake_at - self.clock()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeup.wait(), timeout)
        holding = earliest - time.monotonic()
        if holding > 0 and not urgent.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(urgent.wait(), holding)
        until = earliest_urgent if urgent.is_set() else earliest
        await asyncio.sleep(max(DEBOUNCE_SECONDS, until - time.monotonic()))


def _on_cpu(step: Callable[..., Outcome], *args: Any) -> tuple[Outcome, float]:
    """`step(*args)` and the CPU seconds its thread used (time.thread_time: neither the waits on the
    API server nor those for the interpreter lock count)."""
    started = time.thread_time()
    outcome = step(*args)
    return outcome, time.thread_time() - started


def _newer_or_same(current: Body | None, candidate: Body) -> bool:
    """Whether `candidate` is not older than `current`, by resourceVersion (etcd revisions)."""
    if current is None:
        return True
    old = str((current.get("metadata") or {}).get("resourceVersion", ""))
    new = str((candidate.get("metadata") or {}).get("resourceVersion", ""))
    if old.isdigit() and new.isdigit():
        return int(new) >= int(old)
    return True
