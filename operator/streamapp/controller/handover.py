"""When a step's new owners may be told: not while a member the plan counts as lost may still run an
older target (functional core, no I/O).

The engine hands a task on without its owner's acknowledgement when the owner's pod is not alive (not
Ready): a standby's failover, a restore elsewhere, an expired reservation. Not Ready is not the same as
stopped. An executor restarted in place runs before its readiness probe passes, and it starts what its
member's target says — so one that read the target just before the step took its tasks away started
them beside their new owner (the chaos run saw a task active on two members for a second).

Two rules close that, one on each side of the member object:

- An executor takes up a task only after acknowledging the target that gives it, conditionally on the
  object's version it read the target from (`executor.membership`). Once the lost member's new target
  is written, no process can confirm an older one.
- The step writes a lost member's target conditionally on the version its plan saw (`conditional`), so
  a confirmation that came in between makes the write fail and the step is planned again; and it tells
  no member of a task it takes up while a lost member has a process that may still run an older target
  (`unsettled`): one that acknowledged a target the step takes something from, or one older than the
  target it holds. The new owners are written once that process acknowledged its new target, or ended.

A process "may still run" when its last report comes from the pod that exists now, from a process
started since that pod's executor container last started, one that has not ended since, and recently
(`FRESH_SECONDS`). A process deaf to the API server stops reporting and stops counting after that
long; it could not confirm a new target either, and whatever it still runs is fenced by the store's
epochs like any lost owner's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from streamapp.api.fields import ValidationError
from streamapp.api.member import StreamAppMemberSpec, StreamAppMemberStatus
from streamapp.controller.observe import PodState, epoch_seconds

Body = Mapping[str, Any]

FRESH_SECONDS = 90.0
"""How recent a lost member's last report must be for its process to count as possibly running: three
times the executor's re-assertion interval (30 s), so a following process always counts."""


def running(pod: PodState | None, status: StreamAppMemberStatus, now: float) -> bool:
    """Whether the process that made `status` may still run in `pod`; pure. Its start (`startedAt`, set
    before its first report) must not precede the executor container's current run; with the container
    not running, the last run must have ended before it (a pod view older than the report reads as
    running). Either start unknown counts as running, within `FRESH_SECONDS` of its last report."""
    if pod is None or not status.pod_uid or status.pod_uid != pod.uid:
        return False
    reported = epoch_seconds(status.reported_at)
    if reported is None or now - reported > FRESH_SECONDS:
        return False
    started = epoch_seconds(status.started_at)
    if started is None:
        return True
    if pod.executor_started is not None:
        return started >= pod.executor_started
    return pod.executor_finished is None or started > pod.executor_finished


def unsettled(
    pod: PodState | None,
    status: StreamAppMemberStatus,
    acked: int,
    spec_generation: int,
    gives_up: bool,
    now: float,
) -> bool:
    """Whether a member whose pod is not alive has a process that may run a target older than the one it
    is to hold; pure. `acked`: the generation it acknowledged (`acknowledgement.acked_generation`);
    `gives_up`: this step takes an ownership from its current target. A process that acknowledged
    nothing yet has taken up nothing, and must confirm whatever it takes up."""
    if pod is not None and (pod.alive or pod.draining):
        return False
    if acked < 1 or not running(pod, status, now):
        return False
    return gives_up or acked < spec_generation


def takes_up(current: Body | None, wanted: Body) -> bool:
    """Whether `wanted` gives an ownership (a task at an epoch) the member's `current` spec does not
    hold; a current spec that does not parse holds nothing."""
    try:
        target = StreamAppMemberSpec.from_dict(dict(wanted), served=True)
    except ValidationError:
        return True
    given = frozenset(target.active_epochs().items())
    if current is None:
        return bool(given)
    try:
        held = StreamAppMemberSpec.from_dict(dict(current), served=True).held()
    except ValidationError:
        return bool(given)
    return bool(given - held)


def conditional(pod: PodState | None) -> bool:
    """Whether a member's new target is written only at the object's version the plan saw: when its pod
    is not alive, so a process that confirmed a target meanwhile is heard before anything moves."""
    return pod is None or not (pod.alive or pod.draining)


def waiting_on(
    members: Iterable[tuple[int, PodState | None, StreamAppMemberStatus, int, int, bool]], now: float
) -> tuple[int, ...]:
    """The lost members the step's new owners wait on (`unsettled`), from (member, pod, report,
    acknowledged generation, target generation, gives up) of each member; pure."""
    return tuple(
        sorted(
            m
            for m, pod, status, acked, generation, gives in members
            if unsettled(pod, status, acked, generation, gives, now)
        )
    )
