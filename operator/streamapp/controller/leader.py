"""Leader election on a coordination.k8s.io Lease, so two operator replicas never act at once.

kopf's peering only pauses operators of lower priority and freezes equal ones; it is not leader
election. Here a replica acts only while it holds the Lease: it renews every `retry_period`, and a
replica that cannot renew within `renew_deadline` stops acting before anyone else may take over
(`renew_deadline` < `lease_duration`). As in client-go, a candidate judges expiry by its own clock:
a lease is expired when its record has not changed for `lease_duration` since this replica first
saw it, never by comparing another host's `renewTime` with the local time, so clock skew between
hosts cannot hand the lease over early. Every call has a timeout shorter than the renew deadline,
so a hung API server cannot keep a replica acting past it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

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

    def release(self) -> None:
        """Give the lease up at once on a clean shutdown, so a successor need not wait it out."""
        c = self.config
        try:
            lease = self.api.read_namespaced_lease(c.name, c.namespace, _request_timeout=c.request_timeout)
            spec = lease.spec
            if spec is not None and spec.holder_identity == c.identity:
                spec.holder_identity = None
                spec.renew_time = None
                self.api.replace_namespaced_lease(
                    c.name, c.namespace, lease, _request_timeout=c.request_timeout
                )
        except ApiException as error:
            log.warning("could not release lease %s: %s", c.name, error.reason)

    def _create(self, now: dt.datetime) -> bool:
        c = self.config
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=c.name, namespace=c.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=c.identity,
                lease_duration_seconds=int(c.lease_duration),
                acquire_time=now,
                renew_time=now,
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
