"""The executor's side of the rebalance protocol: follow the member's target, acknowledge, report.

The operator writes the member's target to its StreamAppMember spec; this client watches it, has the
data plane apply it — revoked tasks finish their batch, commit and stop *before* the acknowledgement
— and only then writes `status.observedGeneration`, which is what lets the operator hand those tasks
to someone else. A target that makes a task active here is acknowledged *before* the task starts, on
condition that the object is still at the version the target was read from (`confirm`): a target read
just before the operator took the task away again — an executor starting while its member is not
Ready, whose tasks the operator restores elsewhere — is refused by the API server, read again, and
never run; one confirmed first is what the operator sees before it hands the task on
(`controller.handover`). What the operator acts on (per-task role, epoch, fencing, a copy caught up) is
reported when it changes, at most every `report_interval`; progress figures alone (lags, applied
positions) at most every `ClientSettings.progress_interval`. Every report names the pod that made it,
so the operator can ignore reports from before a restart. Spec and status are read and written through the `api.member`
models, the same ones the operator writes and reads them with.

The watch and the writes, and how they outlive an API server that goes away, are
`executor.memberwatch`'s. What this side adds for the same end: the last report is written again every
`reassert_interval`, at once when the StreamAppMember turns out to be new (re-created) or to carry no
report, and after a backoff when a write failed — so an acknowledgement lost on the way is never lost
for good.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from streamapp.api.fields import ValidationError
from streamapp.api.member import (
    ActiveTask,
    LocalCopy,
    RevokingTask,
    StreamAppMemberSpec,
    StreamAppMemberStatus,
    TaskReport,
)
from streamapp.api.names import member_name
from streamapp.executor.memberwatch import ClientSettings, MemberWatch, backoff_delay, describe

log = logging.getLogger(__name__)


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


def holding_back(target: StreamAppMemberSpec, reports: Iterable[TaskReport]) -> StreamAppMemberSpec | None:
    """`target` without the ownerships it adds here, or None when it adds none; pure. A task it makes
    active that does not run here at that epoch keeps the role it has now (a copy stays a copy, an owner
    at an older epoch keeps that epoch), and one not here is listed as revoked, so it stays away and
    its local state is not pruned as a task gone: applied first, this does everything the target asks
    but take up a task, which must wait for the confirmation (`confirm`)."""
    now = {r.task: r for r in reports}
    active: dict[int, int] = {}
    revoking: dict[int, int] = {}
    standby, warmup = set(target.standby), set(target.warmup)
    adds = False
    for task, epoch in target.active_epochs().items():
        report = now.get(task)
        if report is not None and report.role == "active" and report.epoch == epoch:
            active[task] = epoch
            continue
        adds = True
        role = report.role if report is not None else None
        if report is not None and role == "active" and report.epoch is not None:
            active[task] = report.epoch
        elif role == "standby":
            standby.add(task)
        elif role == "warmup":
            warmup.add(task)
        else:
            revoking[task] = epoch
    if not adds:
        return None
    return replace(
        target,
        active=tuple(ActiveTask(task=t, epoch=e) for t, e in sorted(active.items())),
        revoking=tuple(
            sorted(
                (*target.revoking, *(RevokingTask(task=t, epoch=e) for t, e in revoking.items())), key=_task
            )
        ),
        standby=tuple(sorted(standby)),
        warmup=tuple(sorted(warmup)),
        active_tasks=None,
        revoking_tasks=None,
        standby_tasks=None,
        warmup_tasks=None,
    )


def _task(entry: ActiveTask | RevokingTask) -> int:
    return entry.task


class DataPlane(Protocol):
    """What runs the tasks: the PySpark runtime in production, a simulation in tests and demos."""

    def apply(self, target: StreamAppMemberSpec) -> None:
        """Make it so; revoked tasks must be committed and stopped when this returns."""

    def reports(self) -> list[TaskReport]:
        """Current per-task progress."""

    def local_copies(self) -> tuple[LocalCopy, ...]:
        """Tasks it keeps local state of but does not run (copies it gave up), newest first."""

    def restore_rate(self) -> float | None:
        """Rows a second this member restores state at, all its restores together, once measured."""

    def batch_running_since(self) -> float | None:
        """When the batch round running now began (epoch seconds), once it has run for over
        `BATCH_NOTICE_SECONDS`; None otherwise."""

    def processing(self) -> tuple[int, float] | None:
        """Input records its active tasks processed and seconds its batch rounds ran, since it started
        (counters: the member's true processing rate, which the operator's autoscaler sizes by); None
        when it does not measure them."""


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
        self.name = member_name(app, member)
        self.watch = MemberWatch(api, namespace, self.name, settings, clock)
        self.pod_uid = pod_uid
        # any moment of this process's life before its first report will do: what the operator asks of
        # `startedAt` is that it is not earlier than this executor container's start
        self.started_at = _now()
        self.data_plane = data_plane
        self.report_interval = report_interval
        self.settings = self.watch.settings
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
        self._reported_copies: tuple[LocalCopy, ...] = ()
        self._reported_round: str | None = None
        self._next_report = 0.0
        self._next_progress = 0.0
        self._reassert_at = 0.0
        self._write_failures = 0
        self._refresh_at: float | None = None

    def healthy(self) -> bool:
        """Whether the member's watch hears from the API server (`MemberWatch.healthy`)."""
        return self.watch.healthy()

    def run(self, stop: threading.Event) -> None:
        """Watch, apply, acknowledge and report until `stop` is set."""
        self.watcher = threading.Thread(
            target=self.watch.follow, args=(stop, self._seen.put), name=f"watch {self.name}", daemon=True
        )
        self.watcher.start()
        while not stop.is_set():
            try:
                seen = self._seen.get(timeout=min(0.5, self.report_interval))
            except queue.Empty:
                seen = None
            if seen is not None:
                self.notice(seen)
            else:
                self.catch_up()
            self.report()

    def notice(self, body: Mapping[str, Any]) -> None:
        """The StreamAppMember as the watch saw it: follow its spec, and have the next `report` write
        at once when the object is one we have not reported to (re-created) or carries no report."""
        uid = (body.get("metadata") or {}).get("uid")
        if uid != self._uid or not body.get("status"):
            self._uid = uid
            self._reassert_at = 0.0
        try:
            target = StreamAppMemberSpec.from_dict(body.get("spec") or {}, served=True)
        except ValidationError as error:
            log.warning("%s: ignoring a target that does not parse: %s", self.name, error)
            return
        self.seen = target
        version = (body.get("metadata") or {}).get("resourceVersion")
        self.follow(target, str(version) if version else None)

    def follow(self, target: StreamAppMemberSpec, version: str | None) -> None:
        """Apply a newer target, then acknowledge it (the acknowledgement is what releases revocations).
        One that takes up a task is applied without it first, then confirmed against `version`, the
        object version it was read from, and only then applied in full; unconfirmed, it is read again."""
        if target.generation <= self.applied and self.applied:
            return
        interim = holding_back(target, self.data_plane.reports())
        if interim is not None:
            self.data_plane.apply(interim)
            if not self.confirm(target.generation, version):
                return
        self.data_plane.apply(target)
        self.applied = target.generation
        self.current = target
        self._reassert_at = 0.0
        self.report()

    def confirm(self, generation: int, version: str | None) -> bool:
        """Acknowledge `generation` if the member is still at `version` (a body read without one, which
        the API server never serves, is acknowledged unconditionally); whether it was. A refusal (the
        object changed since: the operator's target, or this executor's own last report) or a failure
        has the member read again — at once, or after a backoff — and the target it then holds applied
        (`refresh`)."""
        since = self.data_plane.batch_running_since()
        running = None if since is None else _stamp(since)
        status = self._status(generation, tuple(self.data_plane.reports()), self._reported_copies, running)
        try:
            self.watch.write_status(status.merge_patch(), version=version)
        except Exception as error:  # every failure alike: nothing is taken up unconfirmed
            conflict = isinstance(error, ApiException) and error.status == 409
            self._write_failures += 0 if conflict else 1
            delay = 0.0 if conflict else backoff_delay(self._write_failures, self.settings)
            self._refresh_at = self.clock() + delay
            log.info(
                "%s: target %d not confirmed (%s); reading the member again",
                self.name,
                generation,
                "it changed since it was read" if conflict else describe(error),
            )
            return False
        self._write_failures = 0
        return True

    def catch_up(self) -> None:
        """Read the member again once due after an unconfirmed target (`confirm`)."""
        if self._refresh_at is not None and self.clock() >= self._refresh_at:
            self.refresh()

    def refresh(self) -> None:
        """Read the member again after an unconfirmed target, and follow what it holds now."""
        self._refresh_at = None
        try:
            body = self.watch.read()
        except Exception as error:  # read again later, like any failed call
            self._write_failures += 1
            self._refresh_at = self.clock() + backoff_delay(self._write_failures, self.settings)
            log.warning("%s: reading the member failed (%s)", self.name, describe(error))
            return
        self.notice(body)

    def _status(
        self, generation: int, tasks: tuple[TaskReport, ...], kept: tuple[LocalCopy, ...], running: str | None
    ) -> StreamAppMemberStatus:
        """The report as of now, acknowledging `generation`."""
        processing = self.data_plane.processing()
        return StreamAppMemberStatus(
            observed_generation=generation,
            pod_uid=self.pod_uid,
            started_at=self.started_at,
            reported_at=_now(),
            tasks=tasks,
            local_copies=kept,
            restore_rate=self.data_plane.restore_rate(),
            processed_records=processing[0] if processing is not None else None,
            busy_seconds=round(processing[1], 3) if processing is not None else None,
            batch_running_since=running,
        )

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
        # Copies given up and pruned are progress too (the task that left changed `tasks` already), so
        # the volume is read only when a progress report may go out, not at every pass of the loop.
        due = now >= self._next_progress or now >= self._reassert_at
        kept = self.data_plane.local_copies() if due else self._reported_copies
        progress = progress_only(self._reported, tasks, caught_up_at) and running == self._reported_round
        allowed = self._next_progress if progress else self._next_report
        changed = (
            tasks != self._reported or running != self._reported_round or kept != self._reported_copies
        ) and now >= allowed
        if not changed and now < self._reassert_at:
            return
        status = self._status(self.applied, tasks, kept, running)
        try:
            self.watch.write_status(status.merge_patch())
        except Exception as error:  # every failure alike: the report must outlive all of them
            self._write_failures += 1
            delay = backoff_delay(self._write_failures, self.settings)
            log.warning("%s: status write failed (%s); again in %.1fs", self.name, describe(error), delay)
            self._next_report = self._next_progress = self._reassert_at = now + delay
            return
        self._write_failures = 0
        if kept != self._reported_copies:  # what the operator weighs a lost task's restore here by
            log.info("%s: local state kept of tasks not run here: %s", self.name, _kept_words(kept))
        self._reported = tasks
        self._reported_copies = kept
        self._reported_round = running
        self._next_report = now + self.report_interval
        self._next_progress = now + self.settings.progress_interval
        self._reassert_at = now + self.settings.reassert_interval


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
        MemberWatch(api(), namespace, member_name(app, member)).write_status(status.merge_patch())
    except Exception as error:  # the log and the exit code still say it
        log.warning("could not report the setup error in the member's status: %s", describe(error))


def _kept_words(kept: tuple[LocalCopy, ...]) -> str:
    return ", ".join(f"{c.task} (at offset {c.applied_offset})" for c in kept) or "none"


def _now() -> str:
    return _stamp(time.time())


def _stamp(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
