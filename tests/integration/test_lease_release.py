"""SIGTERM releases the Lease to the other replica every time, even with a renewal in flight.

Both replicas reach the API server through a fault proxy (faultproxy.py) that holds every write of
a Lease for a while before forwarding it, as a busy API server would: most of the time a renewal
of the leader's is in flight, so its SIGTERM lands during one. The leader must still give the lease
up — not leave it to expire — and the other replica take it over. Judged by the Lease's own records,
watched from outside: after the leader's last record comes a record with no holder (the release),
and the successor acquired it before the leader's last renewal would have expired.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from faultproxy import FaultProxy
from kubernetes import client, watch
from operator_support import Operator, Operators
from urllib3.exceptions import ProtocolError

from localcluster.waiting import wait_for

LEASE = "streamapp-operator"
# make test hands over three times; make test-long ten times (the "10 of 10").
TRIES = {"short": 3, "long": 10}
# A Lease write held this long is in flight three quarters of each 2 s retry period.
WRITE_SECONDS = 1.5


@dataclass(frozen=True)
class Record:
    """One version of the Lease, as its watch delivered it."""

    holder: str | None
    renewed: dt.datetime | None
    acquired: dt.datetime | None
    duration: int | None


def released_then_taken(records: list[Record], leader: str, successor: str) -> bool:
    """Whether the lease went from `leader` through a release (no holder) to `successor`, who
    acquired it before `leader`'s last renewal could have expired."""
    last = max(i for i, r in enumerate(records) if r.holder == leader)
    taken = next(i for i, r in enumerate(records) if i > last and r.holder == successor)
    held, took = records[last], records[taken]
    assert held.renewed is not None and held.duration is not None and took.acquired is not None
    released = any(not r.holder for r in records[last + 1 : taken])
    return released and took.acquired < held.renewed + dt.timedelta(seconds=held.duration)


@contextmanager
def lease_records(api: client.ApiClient, namespace: str) -> Iterator[list[Record]]:
    """Every version of the Lease from now on, straight from the API server (not the proxy)."""
    records: list[Record] = []
    watcher = watch.Watch()

    def run() -> None:
        stream = watcher.stream(
            client.CoordinationV1Api(api).list_namespaced_lease,
            namespace,
            field_selector=f"metadata.name={LEASE}",
        )
        with contextlib.suppress(ProtocolError):  # the connection closed under a stopped watch
            for event in stream:
                spec = event["object"].spec
                records.append(
                    Record(
                        spec.holder_identity, spec.renew_time, spec.acquire_time, spec.lease_duration_seconds
                    )
                )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield records
    finally:
        watcher.stop()


@pytest.mark.parametrize("tries", [pytest.param("short"), pytest.param("long", marks=pytest.mark.long)])
def test_every_sigterm_releases_the_lease_to_the_other_replica(
    tries: str,
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    fault_proxy: FaultProxy,
) -> None:
    with lease_records(api_client, namespace) as records:
        fault_proxy.delay("PUT", "leases", WRITE_SECONDS)
        leader = operators.start("op-0", leader_election=True)
        wait_for(lambda: any(r.holder == "op-0" for r in records), 60, "op-0 holding the lease")
        for n in range(1, TRIES[tries] + 1):
            successor = operators.start(f"op-{n}", leader_election=True)
            hand_over(leader, successor, records)
            leader = successor


def hand_over(leader: Operator, successor: Operator, records: list[Record]) -> None:
    """SIGTERM `leader` once `successor` waits for the lease; it must be released to `successor`."""
    wait_for(lambda: "waiting for lease" in successor.log.read_text(), 60, f"{successor.identity} started")
    leader.process.terminate()
    wait_for(
        lambda: any(r.holder == successor.identity for r in records), 60, f"{successor.identity} leading"
    )
    assert released_then_taken(records, leader.identity, successor.identity), records
    assert leader.process.wait(15) == 0
