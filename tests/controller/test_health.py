"""`/healthz` fails when the part of the operator that acts has stopped, and only then: the event loop
blocked, or one reconcile hung; a replica waiting for the Lease is healthy (`controller.health`)."""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request

from handclock import HandClock
from localcluster.waiting import wait_for
from streamapp.controller import endpoints
from streamapp.controller.health import Health, beating
from streamapp.controller.metrics import Metrics


def test_a_standby_is_healthy_and_an_acting_replica_needs_its_loop_and_no_hung_reconcile() -> None:
    clock = HandClock(100.0)
    health = Health(clock=clock, stall_after=60.0, stuck_after=600.0)
    assert health.problem() is None, "waiting for the Lease acts on nothing: nothing to restart for"
    clock.now += 3_600
    assert health.problem() is None

    health.act(True)
    health.started(("ns", "counts"))
    clock.now += 59
    health.beat()
    assert health.problem() is None
    clock.now += 61
    assert health.problem() == "the event loop that acts has not run for 61 s"
    health.beat()
    assert health.problem() is None
    clock.now += 500
    health.beat()
    assert health.problem() == "the reconcile of ns/counts has run for 620 s"
    health.ended(("ns", "counts"))
    assert health.problem() is None
    health.act(False)
    clock.now += 10_000
    assert health.problem() is None, "no longer leading: healthy again"


def status_of(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_healthz_fails_once_the_acting_event_loop_is_blocked_and_metrics_still_answer() -> None:
    """A real event loop beats, then a coroutine blocks it (what a call without a timeout does): the
    probe's endpoint turns 503 naming it, while `/metrics`, on threads of its own, still answers."""
    health = Health(stall_after=0.5)
    server = endpoints.serve(0, "127.0.0.1", Metrics().registry, health)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    release, stop = threading.Event(), threading.Event()

    async def acting() -> None:
        health.act(True)
        beats = asyncio.create_task(beating(health, stop.is_set))
        await asyncio.sleep(0.1)
        release.wait(60)  # blocks the whole loop, beats included
        stop.set()
        await beats

    try:
        loop = threading.Thread(target=asyncio.run, args=(acting(),), daemon=True)
        loop.start()
        wait_for(lambda: status_of(f"{base}/healthz")[0] == 503, 30, "/healthz failing on the blocked loop")
        status, text = status_of(f"{base}/healthz")
        assert status == 503 and "event loop" in text, text
        assert status_of(f"{base}/metrics")[0] == 200
        release.set()
        loop.join(10)
        health.act(False)
        assert status_of(f"{base}/healthz") == (200, "ok\n")
    finally:
        release.set()
        server.shutdown()


def test_the_endpoints_serve_on_an_ipv6_address_too() -> None:
    """A pod's IP (`--metrics-address`) may be IPv6."""
    server = endpoints.serve(0, "::1", Metrics().registry, Health())
    try:
        assert status_of(f"http://[::1]:{server.server_address[1]}/healthz") == (200, "ok\n")
    finally:
        server.shutdown()
