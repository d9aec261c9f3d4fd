"""Lease semantics of leader election, against an in-memory Lease store with the API server's
optimistic concurrency (resourceVersion preconditions). The real API server is exercised by the
operator integration tests (failover between two replicas, release on SIGTERM)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from streamapp.controller.leader import LeaseConfig, LeaseLock

LONG_AGO = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


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
        lease.spec.renew_time = renew_time
        self.replace_namespaced_lease("", "", lease)

    def _store(self, body: client.V1Lease) -> None:
        self.version += 1
        stored = copy.deepcopy(body)
        stored.metadata.resource_version = str(self.version)
        self.lease = stored


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lock(store: LeaseStore, identity: str, clock: Clock) -> LeaseLock:
    made = LeaseLock(client.ApiClient(), LeaseConfig("ns", "lease", identity), clock=clock)
    made.api = store  # type: ignore[assignment]
    return made


def test_expiry_is_judged_on_the_local_clock_not_the_holders_renew_time() -> None:
    store, clock = LeaseStore(), Clock()
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
    store, clock = LeaseStore(), Clock()
    assert lock(store, "a", clock).try_acquire(LONG_AGO)
    b = lock(store, "b", clock)
    for _ in range(20):
        clock.now += 10
        store.renew_as("a", LONG_AGO)
        assert not b.try_acquire(dt.datetime.now(dt.UTC))


def test_a_released_lease_is_taken_at_once() -> None:
    store, clock = LeaseStore(), Clock()
    a = lock(store, "a", clock)
    assert a.try_acquire(dt.datetime.now(dt.UTC))
    a.release()
    assert lock(store, "b", clock).try_acquire(dt.datetime.now(dt.UTC))


def test_a_write_racing_another_candidate_loses_on_the_resource_version() -> None:
    store, clock = LeaseStore(), Clock()
    a = lock(store, "a", clock)
    assert a.try_acquire(dt.datetime.now(dt.UTC))
    a.release()
    before = store.read_namespaced_lease("", "")
    store.renew_as("c", dt.datetime.now(dt.UTC))  # c takes the free lease after b read it
    store.stale = before
    assert not lock(store, "b", clock).try_acquire(dt.datetime.now(dt.UTC))
    assert store.lease is not None and store.lease.spec.holder_identity == "c"
