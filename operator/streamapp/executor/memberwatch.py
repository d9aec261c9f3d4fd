"""The API side of one StreamAppMember, as its executor sees it: a watch that follows the object
through any outage of the API server, and the writes of its status.

The API server may go away at any moment (a restart, a pause, a partition), and the executor must be
following again as soon as it is back, without a restart of the process:

- every call has a timeout, so a hung connection fails instead of blocking forever;
- every failure, whatever its class, is retried after a capped exponential backoff with jitter (so
  many executors do not all return at the same instant);
- the watch asks the server to end it every `watch_seconds` and resumes from the last version seen,
  or lists again when that version is gone (410) or after a failure;
- `healthy()` turns false when the watch has not heard from the API server for `unhealthy_after`,
  so the pod's readiness tells that this member is deaf to its target.

What the executor does with what it sees, and what it reports, is the protocol's
(`executor.membership`).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import urllib3
from kubernetes import client

from streamapp.api.names import GROUP, MEMBERS, VERSION

log = logging.getLogger(__name__)
EMPTY_STREAM_SECONDS = 1.0
"""A watch that ends sooner than this with no event in it was cut off, not ended by its timeout."""


@dataclass(frozen=True)
class ClientSettings:
    """Timing of the membership client.

    `progress_interval` (10 s) spaces reports that change only progress figures (`progress_only`):
    under flowing input every report changes a task's input lag or a copy's applied offset, and with
    1,000 members reporting every `report_interval` the operator and etcd took 500 writes a second of
    objects listing every copy, for numbers nothing waits on (the app's input lag for autoscalers,
    which poll every 15-30 s). What the operator acts on — roles, epochs, acknowledgements, fencing, a
    copy becoming caught up — still goes out within `report_interval`.

    `unhealthy_after` (30 s) is longer than the server-side watch period plus a reconnect, and than a
    routine API-server restart (about 15 s), so readiness does not flap on either; it is far shorter
    than a revocation timeout (minutes), so a member that really is deaf to its target is seen as not
    ready, and replaced, long before a revocation it cannot hear about would have to time out.
    """

    progress_interval: float = 10.0
    connect_timeout: float = 5.0
    read_timeout: float = 15.0
    watch_seconds: int = 15
    watch_read_slack: float = 10.0
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    reassert_interval: float = 30.0
    unhealthy_after: float = 30.0

    @property
    def request_timeout(self) -> tuple[float, float]:
        """(connect, read) of a plain call."""
        return (self.connect_timeout, self.read_timeout)

    @property
    def watch_timeout(self) -> tuple[float, float]:
        """(connect, read) of a watch: a read may wait for the server to end the watch, no longer."""
        return (self.connect_timeout, self.watch_seconds + self.watch_read_slack)


def backoff_delay(
    failures: int, settings: ClientSettings, rand: Callable[[], float] = random.random
) -> float:
    """Seconds to wait after `failures` failures in a row: doubling from `backoff_initial` up to
    `backoff_max`, the upper half random (jitter), so retries spread out but never wait past the cap."""
    step = min(settings.backoff_max, settings.backoff_initial * 2.0 ** max(0, failures - 1))
    return step / 2 + rand() * step / 2


class WatchError(RuntimeError):
    """The watch stream reported an error other than an expired version."""


class MemberWatch:
    """One StreamAppMember on the API server: watched until stopped, its status written."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        settings: ClientSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.name = name
        self.settings = settings or ClientSettings()
        self.clock = clock
        self._last_contact: float | None = None

    def healthy(self) -> bool:
        """Whether the watch has heard from the API server within `unhealthy_after` (never before its
        first listing): a healthy stream is ended by the server every `watch_seconds`, so a longer
        silence means the API server is unreachable, hung, or the watch has stopped."""
        contact = self._last_contact
        return contact is not None and self.clock() - contact <= self.settings.unhealthy_after

    def write_status(self, patch: dict[str, Any], version: str | None = None) -> None:
        """Merge-patch the member's status (raises what the API raises); with `version`, only if the
        object is still at that resourceVersion (the API server answers 409 Conflict otherwise)."""
        if version is not None:
            patch = {**patch, "metadata": {"resourceVersion": version}}
        self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            self.namespace,
            MEMBERS,
            self.name,
            patch,
            _request_timeout=self.settings.request_timeout,
        )

    def read(self) -> Mapping[str, Any]:
        """The member as the API server holds it now (a read from storage, not a cache)."""
        return cast(
            Mapping[str, Any],
            self.custom.get_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                MEMBERS,
                self.name,
                _request_timeout=self.settings.request_timeout,
            ),
        )

    def follow(self, stop: threading.Event, seen: Callable[[Mapping[str, Any]], None]) -> None:
        """Hand every version of the member to `seen` until `stop` is set: list, then watch from the
        listed version; on any failure back off and list again. A watch
        that the server (or a proxy) ends at once with nothing in it is a failure too: reconnecting at
        once spun on the API server in a loop of empty streams."""
        failures = 0
        version: str | None = None
        while not stop.is_set():
            try:
                if version is None:
                    version = self.list_member(seen)
                began = self.clock()
                version, delivered = self.stream(stop, version, seen)
                if delivered == 0 and self.clock() - began < EMPTY_STREAM_SECONDS:
                    failures += 1
                    stop.wait(backoff_delay(failures, self.settings))
                else:
                    failures = 0
            except Exception as error:  # every failure alike: the watch must outlive all of them
                failures += 1
                version = None
                delay = backoff_delay(failures, self.settings)
                log.warning("%s: watch failed (%s); again in %.1fs", self.name, describe(error), delay)
                stop.wait(delay)

    def _list(self, **options: Any) -> Any:
        """The member's object listed (one, by name), or watched: `options` say which."""
        return self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, MEMBERS, field_selector=f"metadata.name={self.name}", **options
        )

    def list_member(self, seen: Callable[[Mapping[str, Any]], None]) -> str:
        """The member as it is now (handed to `seen`); the version to watch from."""
        listing = cast(Mapping[str, Any], self._list(_request_timeout=self.settings.request_timeout))
        self._last_contact = self.clock()
        for item in listing.get("items") or []:
            seen(item)
        return str(listing["metadata"]["resourceVersion"])

    def stream(
        self, stop: threading.Event, version: str, seen: Callable[[Mapping[str, Any]], None]
    ) -> tuple[str | None, int]:
        """One watch from `version` until the server ends it; the version to resume from, or None
        when the server no longer has `version` (410 Gone: list again), and how many events came."""
        response = cast(
            urllib3.BaseHTTPResponse,
            self._list(
                watch=True,
                allow_watch_bookmarks=True,
                resource_version=version,
                timeout_seconds=self.settings.watch_seconds,
                _preload_content=False,  # the raw response, read line by line as events arrive
                _request_timeout=self.settings.watch_timeout,
            ),
        )
        self._last_contact = self.clock()
        delivered = 0
        try:
            for line in _lines(response):
                self._last_contact = self.clock()
                if stop.is_set():
                    return version, delivered
                if not line:
                    continue
                event = json.loads(line)
                delivered += 1
                kind, body = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    if body.get("code") == 410:
                        return None, delivered
                    raise WatchError(f"{body.get('code')} {body.get('reason')}: {body.get('message')}")
                version = str((body.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED"):
                    seen(body)
        finally:
            response.close()
            response.release_conn()
        self._last_contact = self.clock()
        return version, delivered


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """The lines of a streamed response as they arrive (a watch sends one JSON event per line)."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from lines


def describe(error: Exception) -> str:
    """A one-line account of a failure (ApiExceptions print their whole response)."""
    status = getattr(error, "status", None)
    reason = getattr(error, "reason", None)
    if status is not None:
        return f"{status} {reason}"
    return f"{type(error).__name__}: {error}"[:300]
