"""The executor's side of the rebalance protocol: follow the member's target, acknowledge, report.

The operator writes the member's target to its StreamAppMember spec; this client watches it, has the
data plane apply it — revoked tasks finish their batch, commit and stop *before* the acknowledgement
— and only then writes `status.observedGeneration`, which is what lets the operator hand those tasks
to someone else. What the operator acts on (per-task role, epoch, fencing, a copy caught up) is
reported when it changes, at most every `report_interval`; progress figures alone (lags, applied
positions) at most every `ClientSettings.progress_interval`. Every report names the pod that made it,
so the operator can ignore reports from before a restart. Spec and status are read and written through the `api.member`
models, the same ones the operator writes and reads them with.

The API server may go away at any moment (a restart, a pause, a partition), and the client must be
following again as soon as it is back, without a restart of the process:

- every call has a timeout, so a hung connection fails instead of blocking forever;
- every failure, whatever its class, is retried after a capped exponential backoff with jitter (so
  many executors do not all return at the same instant);
- the watch asks the server to end it every `watch_seconds` and resumes from the last version seen,
  or lists again when that version is gone (410) or after a failure;
- the last report is written again every `reassert_interval`, at once when the StreamAppMember turns
  out to be new (re-created) or to carry no report, and after a backoff when a write failed — so an
  acknowledgement lost on the way is never lost for good;
- `healthy()` turns false when the watch has not heard from the API server for `unhealthy_after`,
  so the pod's readiness tells that this member is deaf to its target.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

import urllib3
from kubernetes import client

from streamapp.api.fields import ValidationError
from streamapp.api.member import StreamAppMemberSpec, StreamAppMemberStatus, TaskReport
from streamapp.api.names import GROUP, MEMBERS, VERSION, member_name

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


def progress_only(
    before: tuple[TaskReport, ...] | None, after: tuple[TaskReport, ...], caught_up_at: tuple[int, ...]
) -> bool:
    """Whether `after` differs from `before` in progress figures only — input lag, applied positions,
    restored rows, a copy's lag while it crosses none of `caught_up_at` — and not in anything the
    operator acts on; pure. `caught_up_at` are the lags the operator acts on (the member spec's
    `lag_thresholds`): a copy reaching `handoffLag` is what releases a handoff, so that report must
    not wait the progress interval."""
    return before is not None and _decisive(before, caught_up_at) == _decisive(after, caught_up_at)


def _decisive(rows: tuple[TaskReport, ...], caught_up_at: tuple[int, ...]) -> tuple[tuple[Any, ...], ...]:
    return tuple(
        (
            r.task,
            r.role,
            r.epoch,
            r.store_epoch,
            r.fenced_by,
            r.resumed_by,
            r.resumed_after,
            tuple(r.lag is not None and r.lag <= at for at in caught_up_at),
        )
        for r in rows
    )


class WatchError(RuntimeError):
    """The watch stream reported an error other than an expired version."""


class DataPlane(Protocol):
    """What runs the tasks: the PySpark runtime in production, a simulation in tests and demos."""

    def apply(self, target: StreamAppMemberSpec) -> None:
        """Make it so; revoked tasks must be committed and stopped when this returns."""

    def reports(self) -> list[TaskReport]:
        """Current per-task progress."""

    def restore_rate(self) -> float | None:
        """Rows a second this member restores state at, once measured."""

    def batch_running_since(self) -> float | None:
        """When the batch round running now began (epoch seconds), once it has run for over
        `BATCH_NOTICE_SECONDS`; None otherwise."""


class MembershipClient:
    """Follows one member's StreamAppMember until stopped, through any API-server outage."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        app: str,
        member: int,
        pod_uid: str,
        data_plane: DataPlane,
        report_interval: float = 2.0,
        settings: ClientSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.name = member_name(app, member)
        self.pod_uid = pod_uid
        # any moment of this process's life before its first report will do: what the operator asks of
        # `startedAt` is that it is not earlier than this executor container's start
        self.started_at = _now()
        self.data_plane = data_plane
        self.report_interval = report_interval
        self.settings = settings or ClientSettings()
        self.clock = clock
        self.applied = 0
        # The newest target seen (its `retiring` counts even when its generation is not new) and the
        # one applied last: what a draining executor still owns.
        self.seen: StreamAppMemberSpec | None = None
        self.current: StreamAppMemberSpec | None = None
        self.watcher: threading.Thread | None = None
        self._seen: queue.Queue[Mapping[str, Any]] = queue.Queue()
        self._uid: str | None = None
        self._reported: tuple[TaskReport, ...] | None = None
        self._reported_round: str | None = None
        self._next_report = 0.0
        self._next_progress = 0.0
        self._reassert_at = 0.0
        self._write_failures = 0
        self._last_contact: float | None = None

    def healthy(self) -> bool:
        """Whether the watch has heard from the API server within `unhealthy_after` (never before its
        first listing): a healthy stream is ended by the server every `watch_seconds`, so a longer
        silence means the API server is unreachable, hung, or the watch has stopped."""
        contact = self._last_contact
        return contact is not None and self.clock() - contact <= self.settings.unhealthy_after

    def run(self, stop: threading.Event) -> None:
        """Watch, apply, acknowledge and report until `stop` is set."""
        self.watcher = threading.Thread(
            target=self._watch, args=(stop,), name=f"watch {self.name}", daemon=True
        )
        self.watcher.start()
        while not stop.is_set():
            try:
                seen = self._seen.get(timeout=min(0.5, self.report_interval))
            except queue.Empty:
                seen = None
            if seen is not None:
                self.notice(seen)
            self.report()

    def notice(self, body: Mapping[str, Any]) -> None:
        """The StreamAppMember as the watch saw it: follow its spec, and have the next `report` write
        at once when the object is one we have not reported to (re-created) or carries no report."""
        uid = (body.get("metadata") or {}).get("uid")
        if uid != self._uid or not body.get("status"):
            self._uid = uid
            self._reassert_at = 0.0
        try:
            target = StreamAppMemberSpec.from_dict(body.get("spec") or {})
        except ValidationError as error:
            log.warning("%s: ignoring a target that does not parse: %s", self.name, error)
            return
        self.seen = target
        self.follow(target)

    def follow(self, target: StreamAppMemberSpec) -> None:
        """Apply a newer target, then acknowledge it (the acknowledgement is what releases revocations)."""
        if target.generation <= self.applied and self.applied:
            return
        self.data_plane.apply(target)
        self.applied = target.generation
        self.current = target
        self._reassert_at = 0.0
        self.report()

    def report(self) -> None:
        """Write the status when it changed and the interval allows — `report_interval` for what the
        operator acts on (a batch round that hangs among it), `progress_interval` for progress figures
        alone — and whenever a re-assertion is due; a failed write is retried after a backoff, changed
        or not."""
        now = self.clock()
        tasks = tuple(self.data_plane.reports())
        # the newest target seen: new thresholds come without a new generation
        caught_up_at = self.seen.caught_up_at() if self.seen is not None else (0,)
        since = self.data_plane.batch_running_since()
        running = None if since is None else _stamp(since)
        progress = progress_only(self._reported, tasks, caught_up_at) and running == self._reported_round
        allowed = self._next_progress if progress else self._next_report
        changed = (tasks != self._reported or running != self._reported_round) and now >= allowed
        if not changed and now < self._reassert_at:
            return
        status = StreamAppMemberStatus(
            observed_generation=self.applied,
            pod_uid=self.pod_uid,
            started_at=self.started_at,
            reported_at=_now(),
            tasks=tasks,
            restore_rate=self.data_plane.restore_rate(),
            batch_running_since=running,
        )
        try:
            self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                MEMBERS,
                self.name,
                status.merge_patch(),
                _request_timeout=self.settings.request_timeout,
            )
        except Exception as error:  # every failure alike: the report must outlive all of them
            self._write_failures += 1
            delay = backoff_delay(self._write_failures, self.settings)
            log.warning("%s: status write failed (%s); again in %.1fs", self.name, _describe(error), delay)
            self._next_report = self._next_progress = self._reassert_at = now + delay
            return
        self._write_failures = 0
        self._reported = tasks
        self._reported_round = running
        self._next_report = now + self.report_interval
        self._next_progress = now + self.settings.progress_interval
        self._reassert_at = now + self.settings.reassert_interval

    def _watch(self, stop: threading.Event) -> None:
        """List, then watch from the listed version; on any failure back off and list again. A watch
        that the server (or a proxy) ends at once with nothing in it is a failure too: reconnecting at
        once spun on the API server in a loop of empty streams."""
        failures = 0
        version: str | None = None
        while not stop.is_set():
            try:
                if version is None:
                    version = self._list()
                began = self.clock()
                version, delivered = self._stream(stop, version)
                if delivered == 0 and self.clock() - began < EMPTY_STREAM_SECONDS:
                    failures += 1
                    stop.wait(backoff_delay(failures, self.settings))
                else:
                    failures = 0
            except Exception as error:  # every failure alike: the watch must outlive all of them
                failures += 1
                version = None
                delay = backoff_delay(failures, self.settings)
                log.warning("%s: watch failed (%s); again in %.1fs", self.name, _describe(error), delay)
                stop.wait(delay)

    def _list(self) -> str:
        """The member as it is now (queued for the main loop); the version to watch from."""
        listing = cast(
            Mapping[str, Any],
            self.custom.list_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                MEMBERS,
                field_selector=f"metadata.name={self.name}",
                _request_timeout=self.settings.request_timeout,
            ),
        )
        self._last_contact = self.clock()
        for item in listing.get("items") or []:
            self._seen.put(item)
        return str(listing["metadata"]["resourceVersion"])

    def _stream(self, stop: threading.Event, version: str) -> tuple[str | None, int]:
        """One watch from `version` until the server ends it; the version to resume from, or None
        when the server no longer has `version` (410 Gone: list again), and how many events came."""
        response = cast(
            urllib3.BaseHTTPResponse,
            self.custom.list_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                MEMBERS,
                field_selector=f"metadata.name={self.name}",
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
                    self._seen.put(body)
        finally:
            response.close()
            response.release_conn()
        self._last_contact = self.clock()
        return version, delivered


def report_setup_error(
    api: Callable[[], client.ApiClient], namespace: str, app: str, member: int, pod_uid: str, message: str
) -> None:
    """Write why this executor cannot start into its StreamAppMember status, where the operator turns
    it into the StreamApp's Degraded condition (`kubectl describe` and GitOps health show it, not only
    the pod's log). One attempt: the executor exits right after, and its restart writes it again."""
    now = _now()
    status = StreamAppMemberStatus(
        pod_uid=pod_uid, started_at=now, reported_at=now, setup_error=message[:4096]
    )
    try:
        client.CustomObjectsApi(api()).patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            MEMBERS,
            member_name(app, member),
            status.merge_patch(),
            _request_timeout=ClientSettings().request_timeout,
        )
    except Exception as error:  # the log and the exit code still say it
        log.warning("could not report the setup error in the member's status: %s", _describe(error))


def _now() -> str:
    return _stamp(time.time())


def _stamp(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """The lines of a streamed response as they arrive (a watch sends one JSON event per line)."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from lines


def _describe(error: Exception) -> str:
    """A one-line account of a failure (ApiExceptions print their whole response)."""
    status = getattr(error, "status", None)
    reason = getattr(error, "reason", None)
    if status is not None:
        return f"{status} {reason}"
    return f"{type(error).__name__}: {error}"[:300]
