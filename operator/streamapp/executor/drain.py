"""What an executor does between SIGTERM and its exit: stop at once, or finish handing its tasks over.

A pod is deleted for one of two reasons. The operator restarts it (a rolling update in place, a
revocation that timed out): its tasks wait for the new pod, so the executor stops at once, as it always
did. Or someone else deletes it (an eviction through the PodDisruptionBudget, a node drain, kubectl
delete): then the operator, seeing the deletion, marks the member `retiring` and hands its tasks over
through warmup → revoke → ack → assign, and the executor keeps following its target — processing,
revoking when asked, acknowledging — until it owns nothing, or until its drain budget
(`STREAMAPP_DRAIN_SECONDS`, the pod's grace period minus a margin to commit) is spent.

The signal comes before the operator's mark can (both react to the same deletion), so an executor not
yet marked waits up to `NOTICE_SECONDS` for it, unless its pod says the operator deleted it itself
(`RESTART_ANNOTATION`, written before the operator's own deletions) or it owns no task (a member
holding only copies, or none, has nothing to hand over: a scale-in or a namespace teardown must not
wait for a mark that changes nothing). `verdict` is the decision, pure in
the target and the clock; `follow_until_drained` is the shell around it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client

from streamapp.api.member import StreamAppMemberSpec
from streamapp.api.names import RESTART_ANNOTATION

log = logging.getLogger(__name__)
# How long an executor told to stop, not (yet) marked retiring, waits for the operator's mark: well
# above a watch event plus one reconcile, well below a grace period.
NOTICE_SECONDS = 10.0
POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Termination:
    """SIGTERM as the executor saw it: when (monotonic seconds), how long it may drain, and whether
    its pod says the operator deleted it itself."""

    since: float
    drain_seconds: float
    restart: bool = False


def verdict(
    termination: Termination,
    seen: StreamAppMemberSpec | None,
    applied: StreamAppMemberSpec | None,
    now: float,
) -> str | None:
    """Why the executor stops now (None: keep following its target).

    `seen` is the newest target (its `retiring` flag), `applied` the last one applied: the executor
    owns nothing once that one has no active and no revoking task (a revoked task counts until the
    operator, having seen the acknowledgement, drops it from the target).
    """
    elapsed = now - termination.since
    if elapsed >= termination.drain_seconds:
        return "drain budget spent"
    if termination.restart:
        return "restarted by the operator"
    owns_nothing = applied is None or (not applied.active and not applied.revoking)
    if seen is not None and seen.retiring:
        return "handed every task over" if owns_nothing else None
    if owns_nothing:
        return "owns no task"
    if elapsed >= min(NOTICE_SECONDS, termination.drain_seconds):
        return "not retiring"
    return None


def restarted_by_operator(api: client.ApiClient, namespace: str, pod: str) -> bool:
    """Whether the pod carries the operator's restart mark; a pod that cannot be read counts as not
    marked (the executor then waits for the `retiring` flag, at most `NOTICE_SECONDS`)."""
    try:
        body = client.CoreV1Api(api).read_namespaced_pod(pod, namespace, _request_timeout=(5.0, 5.0))
    except Exception as error:  # every failure alike: the drain must not depend on this read
        log.warning("could not read pod %s to see who deleted it: %s", pod, type(error).__name__)
        return False
    meta = body.metadata
    return meta is not None and RESTART_ANNOTATION in (meta.annotations or {})


def follow_until_drained(
    terminated: threading.Event,
    stop: threading.Event,
    drain_seconds: float,
    restart: Callable[[], bool],
    targets: Callable[[], tuple[StreamAppMemberSpec | None, StreamAppMemberSpec | None]],
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Once `terminated` is set, set `stop` when `verdict` says so; `restart` reads the pod's mark,
    `targets` gives (newest seen, last applied)."""
    while not terminated.wait(POLL_SECONDS):
        if stop.is_set():
            return
    termination = Termination(clock(), drain_seconds)
    if drain_seconds > 0:
        termination = Termination(termination.since, drain_seconds, restart())
    while not stop.is_set():
        reason = verdict(termination, *targets(), clock())
        if reason is not None:
            log.info("stopping after SIGTERM: %s", reason)
            stop.set()
            return
        stop.wait(POLL_SECONDS)
