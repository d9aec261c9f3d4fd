"""Leader election on a coordination.k8s.io Lease, so two operator replicas never act at once.

kopf's peering only pauses operators of lower priority and freezes equal ones; it is not leader
election. Here a replica acts only while it holds the Lease: it renews every `retry_period`, and a
replica that cannot renew within `lease_duration` stops acting before anyone else may take over
(`renew_deadline` < `lease_duration`), so leaderships never overlap as long as clocks tick at
roughly the same rate.
"""

from __future__ import annotations

import datetime as dt
import logging
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


class LeaseLock:
    """Acquire or renew the lease; one call is one attempt."""

    def __init__(self, api: client.ApiClient, config: LeaseConfig) -> None:
        self.api = client.CoordinationV1Api(api)
        self.config = config

    def try_acquire(self, now: dt.datetime) -> bool:
        """True when we hold the lease after this attempt."""
        c = self.config
        try:
            lease = self.api.read_namespaced_lease(c.name, c.namespace)
        except ApiException as error:
            if error.status != 404:
                raise
            return self._create(now)
        spec = lease.spec = lease.spec or client.V1LeaseSpec()
        holder = spec.holder_identity
        renewed = spec.renew_time or spec.acquire_time
        expired = renewed is None or (now - renewed).total_seconds() > (spec.lease_duration_seconds or 0)
        if holder and holder != c.identity and not expired:
            return False  # held by another replica (a released lease has no holder)
        if holder != c.identity:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.holder_identity = c.identity
        spec.renew_time = now
        spec.lease_duration_seconds = int(c.lease_duration)
        try:
            self.api.replace_namespaced_lease(c.name, c.namespace, lease)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True

    def release(self) -> None:
        """Give the lease up at once on a clean shutdown, so a successor need not wait it out."""
        c = self.config
        try:
            lease = self.api.read_namespaced_lease(c.name, c.namespace)
            spec = lease.spec
            if spec is not None and spec.holder_identity == c.identity:
                spec.holder_identity = None
                spec.renew_time = None
                self.api.replace_namespaced_lease(c.name, c.namespace, lease)
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
            self.api.create_namespaced_lease(c.namespace, body)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True
