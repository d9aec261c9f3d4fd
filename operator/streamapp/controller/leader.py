"""Leader election on a coordination.k8s.io Lease, so two operator replicas never act at once.

kopf's peering only pauses operators of lower priority and freezes equal ones; it is not leader
election. Here a replica acts only while it holds the Lease: it renews every `retry_period`, and a
replica that cannot renew within `renew_deadline` stops acting before anyone else may take over
(`renew_deadline` < `lease_duration`). As in client-go, a candidate judges expiry by its own clock:
a lease is expired when its record has not changed for `lease_duration` since this replica first
saw it, never by comparing another host's `renewTime` with the local time, so clock skew between
hosts cannot hand the lease over early.

Whether this replica still leads is judged by a clock of its own, not by the outcome of a call: the
attempts to renew run on a thread of their own (`Renewals`), and the replica stops acting once
`renew_deadline` has passed since the last attempt that succeeded began — whatever attempt is in
flight, however long a hung API server keeps it. Every call has a timeout and no hidden retries
(`bounded_client`: urllib3 retried a failed call three times, so one "attempt" could take ~40 s). On
shutdown the replica stops acting, waits a bounded moment for the reconcile in flight and for the
renewal in flight, and releases the Lease — reading it again and retrying while a write conflicts and
the Lease still names it — so a successor takes over within its next retry (`lead`).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    """Where the lease lives, who we are and its timing (client-go's defaults)."""

    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    request_timeout: float = 5.0


class LeaseLock:
    """Acquire or renew the lease; one call is one attempt."""

    def __init__(
        self, api: client.ApiClient, config: LeaseConfig, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.api = client.CoordinationV1Api(api)
        self.config = config
        self.clock = clock
        self._observed: tuple[str | None, str | None] | None = None
        self._observed_at = 0.0

    def try_acquire(self, now: dt.datetime) -> bool:
        """True when we hold the lease after this attempt (`now` is only written, never compared)."""
        c = self.config
        try:
            lease = self.api.read_namespaced_lease(c.name, c.namespace, _request_timeout=c.request_timeout)
        except ApiException as error:
            if error.status != 404:
                raise
            return self._create(now)
        spec = lease.spec = lease.spec or client.V1LeaseSpec()
        holder = spec.holder_identity
        version = lease.metadata.resource_version if lease.metadata else None
        if holder and holder != c.identity and not self._expired(spec, version):
            return False  # held by another replica (a released lease has no holder)
        if holder != c.identity:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.holder_identity = c.identity
        spec.renew_time = now
        spec.lease_duration_seconds = int(c.lease_duration)
        _micro_times(spec)
        try:
            self.api.replace_namespaced_lease(c.name, c.namespace, lease, _request_timeout=c.request_timeout)
        except ApiException as error:
            if error.status == 409:
                return False  # someone else wrote it since we read it (resourceVersion precondition)
            raise
        return True

    def _expired(self, spec: client.V1LeaseSpec, version: str | None) -> bool:
        """Whether the holder has not renewed for a lease duration, measured on our own clock from
        the moment we first saw its current record (holder and resourceVersion)."""
        record = (spec.holder_identity, version)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        duration = spec.lease_duration_seconds or self.config.lease_duration
        return self.clock() - self._observed_at > duration

    def release(self) -> bool:
        """Give the lease up at once on a clean shutdown, so a successor need not wait it out; True
        when this call released it.

        A write that conflicts means the Lease changed since we read it — a renewal of ours that
        was still in flight renewed it — so while the record still names us, read it again and retry:
        giving up there left the lease held until it expired (15 s without a leader)."""
        c = self.config
        for _ in range(RELEASE_ATTEMPTS):
            try:
                lease = self.api.read_namespaced_lease(
                    c.name, c.namespace, _request_timeout=c.request_timeout
                )
                spec = lease.spec
                if spec is None or spec.holder_identity != c.identity:
                    return False  # not ours (any more): nothing to give up
                spec.holder_identity = None
                spec.renew_time = None
                _micro_times(spec)
                self.api.replace_namespaced_lease(
                    c.name, c.namespace, lease, _request_timeout=c.request_timeout
                )
                return True
            except ApiException as error:
                if error.status != 409:
                    log.warning("could not release lease %s: %s", c.name, error.reason)
                    return False
        log.warning(
            "could not release lease %s: it kept changing under %d attempts", c.name, RELEASE_ATTEMPTS
        )
        return False

    def _create(self, now: dt.datetime) -> bool:
        c = self.config
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=c.name, namespace=c.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=c.identity,
                lease_duration_seconds=int(c.lease_duration),
                acquire_time=micro_time(now),
                renew_time=micro_time(now),
                lease_transitions=0,
            ),
        )
        try:
            self.api.create_namespaced_lease(c.namespace, body, _request_timeout=c.request_timeout)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True


RELEASE_ATTEMPTS = 5
"""Reads and writes a release tries while its writes conflict (each conflict is a write of our own
renewal; after the renewals stop, at most one can be in flight)."""

REQUEST_TIMEOUT = (5.0, 10.0)
"""(connect, read) seconds of every call the operator makes itself (kopf's watches keep its settings)."""


class BoundedApiClient(client.ApiClient):
    """The official client with a timeout on every call that does not name one, and no retries."""

    def __init__(self, configuration: client.Configuration, timeout: tuple[float, float]) -> None:
        configuration.retries = 0  # urllib3's default retried 3 times behind every call
        super().__init__(configuration)
        self.default_timeout = timeout

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) < 6 and kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = self.default_timeout
        return super().call_api(*args, **kwargs)


def bounded_client(timeout: tuple[float, float] = REQUEST_TIMEOUT) -> client.ApiClient:
    """An API client on the loaded configuration (kubeconfig or in-cluster) whose every call has a
    timeout and no hidden retries: a hung API server fails a call, never holds it."""
    return BoundedApiClient(client.Configuration.get_default_copy(), timeout)


class Renewals:
    """Acquire-or-renew attempts every `retry_period`, on a thread of their own; `held` says whether
    the lease is ours by the time since the last successful attempt began, on this replica's clock,
    whatever attempt is in flight."""

    def __init__(
        self,
        lock: LeaseLock,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.lock = lock
        self.config = lock.config
        self.clock = clock
        self.now = now
        self.succeeded_at: float | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """No attempt starts after this (one in flight may still end: see `settle`)."""
        self._stopped.set()

    def settle(self) -> None:
        """After `stop`, wait up to one call's timeout for the attempt in flight, so that a release
        does not race it (should it still run, its write conflicts with the release, or the release
        retries on a fresh read)."""
        if self._thread.is_alive():
            self._thread.join(self.config.request_timeout)

    def held(self) -> bool:
        began = self.succeeded_at
        return began is not None and self.clock() - began <= self.config.renew_deadline

    def _run(self) -> None:
        while not self._stopped.is_set():
            began = self.clock()
            try:
                if self.lock.try_acquire(self.now()) and not self._stopped.is_set():
                    self.succeeded_at = began
            except Exception:
                log.exception("lease %s/%s: attempt failed", self.config.namespace, self.config.name)
            self._stopped.wait(max(0.0, self.config.retry_period - (self.clock() - began)))


SHUTDOWN_JOIN_SECONDS = 2.0
"""How long shutdown waits for the reconcile in flight before releasing the Lease: it writes nothing
once told to stop (`Kube` checks before every call), and a call already sent is bounded by its timeout
and guarded by resourceVersion preconditions, so a successor need not wait for it."""


def lead(
    renewals: Renewals,
    act: Callable[[threading.Event], None],
    shutdown: threading.Event,
    poll: float = 0.1,
) -> None:
    """Wait for the lease, run `act` (until the event it is given is set) while holding it, stop it the
    moment the lease is no longer held (judged every `poll` s) or on `shutdown`, then release the lease
    if it is still ours."""
    config = renewals.config
    renewals.start()
    try:
        log.info("waiting for lease %s/%s as %s", config.namespace, config.name, config.identity)
        while not renewals.held():
            if shutdown.wait(poll):
                return
        log.info("acquired lease %s/%s: acting", config.namespace, config.name)
        stop = threading.Event()
        worker = threading.Thread(target=act, args=(stop,), name="operator", daemon=True)
        worker.start()
        try:
            while worker.is_alive() and not shutdown.wait(poll):
                if not renewals.held():
                    log.error("lost lease %s/%s: stopping", config.namespace, config.name)
                    break
        finally:
            stop.set()
            worker.join(SHUTDOWN_JOIN_SECONDS)
    finally:
        renewals.stop()
        if renewals.held():
            renewals.settle()
            if renewals.lock.release():
                log.info("released lease %s/%s", config.namespace, config.name)


class MicroTime(dt.datetime):
    """A Lease time as the API server parses it (`MicroTime`): always six fractional digits. The client
    writes a datetime with `isoformat`, which leaves them out when the microseconds are zero, and the
    server refuses the write (a renewal failed so, at 03:20:32.000000, in a bench run). The client's
    models turn a string back into a datetime, so the spelling is the datetime's own."""

    def isoformat(self, sep: str = "T", timespec: str = "microseconds") -> str:
        return super().isoformat(sep, "microseconds")


def micro_time(moment: dt.datetime) -> MicroTime:
    """`moment` as a `MicroTime`."""
    at = moment.astimezone(dt.UTC)
    return MicroTime(at.year, at.month, at.day, at.hour, at.minute, at.second, at.microsecond, dt.UTC)


def _micro_times(spec: client.V1LeaseSpec) -> None:
    """Make the spec's times `MicroTime`s before a write: `acquire_time` comes back from a read as a
    plain datetime, and is written again with every renewal."""
    for field in ("acquire_time", "renew_time"):
        moment = getattr(spec, field)
        if isinstance(moment, dt.datetime):
            setattr(spec, field, micro_time(moment))
