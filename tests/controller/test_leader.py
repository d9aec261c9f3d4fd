"""Lease semantics of leader election, against an in-memory Lease store with the API server's
optimistic concurrency (resourceVersion preconditions). The real API server is exercised by the
operator integration tests (failover between two replicas, release on SIGTERM)."""

from __future__ import annotations

import copy
import datetime as dt
import re
import threading
import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from handclock import HandClock
from streamapp.controller.leader import (
    SHUTDOWN_JOIN_SECONDS,
    BoundedApiClient,
    LeaseConfig,
    LeaseLock,
    Renewals,
    lead,
    micro_time,
)

LONG_AGO = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)  # no microseconds: written as the server parses it
MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)")


class LeaseStore:
    """read/create/replace of one Lease, bumping resourceVersion on every write."""

    def __init__(self) -> None:
        self.lease: client.V1Lease | None = None
        self.version = 0
        self.stale: client.V1Lease | None = None  # what the next read returns, if set

    def read_namespaced_lease(self, name: str, namespace: str, **_: Any) -> client.V1Lease:
        if self.stale is not None:
            stale, self.stale = self.stale, None
            return stale
        if self.lease is None:
            raise ApiException(status=404)
        return copy.deepcopy(self.lease)

    def create_namespaced_lease(self, namespace: str, body: client.V1Lease, **_: Any) -> None:
        if self.lease is not None:
            raise ApiException(status=409)
        self._store(body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: client.V1Lease, **_: Any) -> None:
        assert self.lease is not None
        if body.metadata.resource_version != self.lease.metadata.resource_version:
            raise ApiException(status=409)
        self._store(body)

    def renew_as(self, holder: str, renew_time: dt.datetime) -> None:
        """Another replica renews (its clock may be far off ours)."""
        lease = self.read_namespaced_lease("", "")
        lease.spec.holder_identity = holder
        lease.spec.renew_time = micro_time(renew_time)
        self.replace_namespaced_lease("", "", lease)

    def _store(self, body: client.V1Lease) -> None:
        """Refuse what the API server refuses: a Lease time not in its MicroTime layout, six
        fractional digits (`2006-01-02T15:04:05.000000Z07:00`), as the client would send it."""
        sent = client.ApiClient().sanitize_for_serialization(body)["spec"]
        for field in ("acquireTime", "renewTime"):
            if field in sent and not MICRO_TIME.fullmatch(str(sent[field])):
                raise ApiException(status=400, reason=f"parsing time {sent[field]!r}")
        self.version += 1
        stored = copy.deepcopy(body)
        stored.metadata.resource_version = str(self.version)
        self.lease = stored


def lock(store: LeaseStore, identity: str, clock: HandClock) -> LeaseLock:
    made = LeaseLock(client.ApiClient(), LeaseConfig("ns", "lease", identity), clock=clock)
    made.api = store  # type: ignore[assignment]
    return made


def test_expiry_is_judged_on_the_local_clock_not_the_holders_renew_time() -> None:
    store, clock = LeaseStore(), HandClock()
    assert lock(store, "a", clock).try_acquire(LONG_AGO)  # a's clock is decades behind ours
    b = lock(store, "b", clock)
    assert not b.try_acquire(dt.datetime.now(dt.UTC)), "a skewed renewTime must not look expired"
    clock.now += 14
    assert not b.try_acquire(dt.datetime.now(dt.UTC))
    clock.now += 2  # 16 s without a change seen by b: a's 15 s lease has run out
    assert b.try_acquire(dt.datetime.now(dt.UTC))
    assert store.lease is not None and store.lease.spec.holder_identity == "b"
    assert store.lease.spec.lease_transitions == 1


def test_a_holder_that_keeps_renewing_is_never_displaced() -> None:
    store, clock = LeaseStore(), HandClock()
    assert lock(store, "a", clock).try_acquire(LONG_AGO)
    b = lock(store, "b", clock)
    for _ in range(20):
        clock.now += 10
        store.renew_as("a", LONG_AGO)
        assert not b.try_acquire(dt.datetime.now(dt.UTC))


def test_a_released_lease_is_taken_at_once() -> None:
    store, clock = LeaseStore(), HandClock()
    a = lock(store, "a", clock)
    assert a.try_acquire(dt.datetime.now(dt.UTC))
    a.release()
    assert lock(store, "b", clock).try_acquire(dt.datetime.now(dt.UTC))


def test_a_release_that_conflicts_with_our_own_renewal_reads_again_and_releases() -> None:
    """A renewal of ours lands between the release's read and its write: the write conflicts, and
    the release, the lease still ours, reads again and gives it up (it used to give up on the 409,
    leaving the lease held until it expired)."""
    store, clock = LeaseStore(), HandClock()
    a = lock(store, "a", clock)
    assert a.try_acquire(dt.datetime.now(dt.UTC))
    before = store.read_namespaced_lease("", "")
    store.renew_as("a", dt.datetime.now(dt.UTC))  # the renewal in flight lands after the release read
    store.stale = before
    assert a.release()
    assert store.lease is not None and store.lease.spec.holder_identity is None


def test_a_release_leaves_a_lease_another_replica_took() -> None:
    store, clock = LeaseStore(), HandClock()
    a = lock(store, "a", clock)
    assert a.try_acquire(dt.datetime.now(dt.UTC))
    store.renew_as("b", dt.datetime.now(dt.UTC))
    assert not a.release()
    assert store.lease is not None and store.lease.spec.holder_identity == "b"


def test_a_write_racing_another_candidate_loses_on_the_resource_version() -> None:
    store, clock = LeaseStore(), HandClock()
    a = lock(store, "a", clock)
    assert a.try_acquire(dt.datetime.now(dt.UTC))
    a.release()
    before = store.read_namespaced_lease("", "")
    store.renew_as("c", dt.datetime.now(dt.UTC))  # c takes the free lease after b read it
    store.stale = before
    assert not lock(store, "b", clock).try_acquire(dt.datetime.now(dt.UTC))
    assert store.lease is not None and store.lease.spec.holder_identity == "c"


class Hung:
    """A TCP server that accepts connections and never answers: a paused or blackholed API server."""

    def __init__(self) -> None:
        import socket

        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.accepted: list[Any] = []
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted.append(connection)


def test_every_call_has_a_timeout_and_no_hidden_retries() -> None:
    """Against an API server that never answers, a lease read fails after its read timeout, on one
    connection: urllib3 retried three times behind each call (an attempt took ~40 s)."""
    hung = Hung()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{hung.port}"
    api = BoundedApiClient(configuration, (0.5, 0.5))
    began = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - a timeout, whatever urllib3 wraps it in
        client.CoordinationV1Api(api).read_namespaced_lease("lease", "ns")
    assert time.monotonic() - began < 2.0
    assert len(hung.accepted) == 1


class ScriptedLock:
    """A lease lock whose attempts succeed until `hang` is set, then block (a hung API server)."""

    def __init__(self, config: LeaseConfig) -> None:
        self.config = config
        self.hang = threading.Event()
        self.released = threading.Event()

    def try_acquire(self, now: dt.datetime) -> bool:
        if self.hang.is_set():
            time.sleep(30)
        return True

    def release(self) -> None:
        self.released.set()


FAST = LeaseConfig("ns", "lease", "a", lease_duration=3.0, renew_deadline=1.0, retry_period=0.1)


def test_a_leader_whose_renewal_hangs_stops_acting_at_the_renew_deadline() -> None:
    """The renewal in flight never returns; acting stops when the renew deadline has passed since the
    last renewal that succeeded — not when (if ever) the hung call gives up."""
    lock = ScriptedLock(FAST)
    stopped_at: list[float] = []

    def act(stop: threading.Event) -> None:
        stop.wait()
        stopped_at.append(time.monotonic())

    runner = threading.Thread(target=lead, args=(Renewals(lock), act, threading.Event()), daemon=True)
    runner.start()
    time.sleep(0.5)
    lock.hang.set()
    hung_at = time.monotonic()
    runner.join(5)
    assert not runner.is_alive() and stopped_at
    assert stopped_at[0] - hung_at <= FAST.renew_deadline + 0.5
    assert not lock.released.is_set(), "a lease no longer held is not released"


def test_shutdown_releases_the_lease_even_while_a_write_hangs() -> None:
    """SIGTERM while the reconcile in flight hangs on a write: acting stops, and the lease is released
    within a couple of seconds, so the other replica takes over at its next retry."""
    lock = ScriptedLock(FAST)
    shutdown = threading.Event()

    def act(stop: threading.Event) -> None:
        time.sleep(60)  # a write that never returns, and never looks at `stop`

    runner = threading.Thread(target=lead, args=(Renewals(lock), act, shutdown), daemon=True)
    runner.start()
    time.sleep(0.5)
    shutdown.set()
    began = time.monotonic()
    assert lock.released.wait(5)
    assert time.monotonic() - began <= SHUTDOWN_JOIN_SECONDS + 0.5
