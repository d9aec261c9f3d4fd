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

from streamapp.controller.admission import STRICT, PodPolicy
from streamapp.controller.kube import Kube
from streamapp.controller.metrics import Metrics
from streamapp.controller.reconcile import Observed, Outcome, reconcile

log = logging.getLogger(__name__)
Key = tuple[str, str]
Body = Mapping[str, Any]

RESYNC_SECONDS = 30.0
DEBOUNCE_SECONDS = 0.05
MAX_BACKOFF_SECONDS = 30.0


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
    apps: dict[Key, Body] = field(default_factory=dict)
    wakeups: dict[Key, asyncio.Event] = field(default_factory=dict)
    tasks: dict[Key, asyncio.Task[None]] = field(default_factory=dict)

    def upsert(self, key: Key, body: Body, sources: Sources) -> None:
        """Record the app as the watch saw it (unless ours is newer) and make sure its loop runs."""
        if _newer_or_same(self.apps.get(key), body):
            self.apps[key] = body
        if key not in self.tasks:
            self.wakeups[key] = asyncio.Event()
            self.tasks[key] = asyncio.create_task(
                self._run(key, sources), name=f"streamapp {key[0]}/{key[1]}"
            )
        self.wake(key)

    def wake(self, key: Key) -> None:
        """Something about the app or its children changed: reconcile soon."""
        event = self.wakeups.get(key)
        if event is not None:
            event.set()

    async def stop(self, key: Key) -> None:
        """The app is gone: stop its loop."""
        task = self.tasks.pop(key, None)
        self.apps.pop(key, None)
        self.wakeups.pop(key, None)
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
        while True:
            wakeup = self.wakeups[key]
            wakeup.clear()
            observed = Observed(
                app=self.apps[key],
                pods=tuple(sources.pods(key)),
                members=tuple(sources.members(key)),
                zones=sources.zones(),
                supporting=tuple(sources.supporting(key)),
            )
            try:
                outcome = await asyncio.to_thread(
                    reconcile, self.kube, observed, self.clock(), self.metrics, self.policy
                )
                failures = 0
            except ApiException as error:
                failures += 1
                log.warning("reconcile of %s/%s failed (%s %s); retrying", *key, error.status, error.reason)
                outcome = Outcome(self.clock() + min(MAX_BACKOFF_SECONDS, 0.5 * 2**failures), None)
            except Exception:
                failures += 1
                log.exception("reconcile of %s/%s failed; retrying", *key)
                outcome = Outcome(self.clock() + min(MAX_BACKOFF_SECONDS, 0.5 * 2**failures), None)
            if outcome.app is not None and _newer_or_same(self.apps.get(key), outcome.app):
                self.apps[key] = outcome.app
            await self._sleep(wakeup, outcome.wake_at)

    async def _sleep(self, wakeup: asyncio.Event, wake_at: float | None) -> None:
        timeout = RESYNC_SECONDS if wake_at is None else min(RESYNC_SECONDS, max(0.0, wake_at - self.clock()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeup.wait(), timeout)
        await asyncio.sleep(DEBOUNCE_SECONDS)


def _newer_or_same(current: Body | None, candidate: Body) -> bool:
    """Whether `candidate` is not older than `current`, by resourceVersion (etcd revisions)."""
    if current is None:
        return True
    old = str((current.get("metadata") or {}).get("resourceVersion", ""))
    new = str((candidate.get("metadata") or {}).get("resourceVersion", ""))
    if old.isdigit() and new.isdigit():
        return int(new) >= int(old)
    return True
