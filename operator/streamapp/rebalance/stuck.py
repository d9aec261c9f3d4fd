"""Members whose executor is stuck: a batch round that never ends, replaced within `maxUnavailable`.

A Spark that hangs (a JVM stopped or wedged in a call that never returns) leaves its pod ready — the
executor's own threads serve the probes — and its membership thread reporting, so neither the kubelet
nor a revocation deadline notices while its tasks are not processed: nothing revokes anything from a
member in steady state. Kafka's consumer has `max.poll.interval.ms` for this. Here the executor says
when its running round began once it has run for half a minute (`batchRunningSince` in its report), and
a member whose round has run `spec.rebalance.batchTimeout` is replaced: its pod is deleted and its tasks
go the way of a lost member's (held for the new pod, or restored elsewhere where that is quicker).

Within the rollout's budget, never all at once: members whose pod is missing or not ready and pods the
step deletes count against
`rollingUpdate.maxUnavailable`, so a cause every member shares (a store that hangs them all) restarts
one member at a time instead of the whole app, longest stuck first. Pure, like the rollout: the shell
reads the reports, passes the clock in, and deletes the pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from streamapp.rebalance.rollout import MemberPod, RolloutStep


def replace_stuck(
    step: RolloutStep,
    pods: Mapping[int, MemberPod],
    running_since: Mapping[int, float],
    replicas: int,
    timeout: float,
    max_unavailable: int,
    now: float,
) -> RolloutStep:
    """`step` with the pods of stuck members added to its deletions, as many as `max_unavailable`
    leaves room for; `running_since` holds, per member whose current pod reported one, when its
    running batch round began; `timeout` 0 replaces nobody. Wakes when the next round would time out."""
    if timeout <= 0:
        return step
    ready = {m for m in range(replicas) if m in pods and pods[m].ready}
    # A member whose pod is missing (being deleted, not yet re-created) is as unavailable as one not ready.
    unavailable = replicas - len(ready) + sum(1 for m in step.delete if m in ready)
    overdue = sorted(
        (since, m)
        for m, since in running_since.items()
        if m in ready and m not in step.delete and now >= since + timeout
    )
    stuck: list[int] = []
    reasons = dict(step.reasons)
    for since, member in overdue:
        if unavailable >= max_unavailable:
            break
        unavailable += 1
        stuck.append(member)
        reasons[member] = (
            f"its batch round has run {now - since:.0f} s, over batchTimeout ({timeout:g} s): "
            "its executor is stuck"
        )
    due = [since + timeout for m, since in running_since.items() if m in ready and now < since + timeout]
    wake_at = min((w for w in (step.wake_at, *due) if w is not None), default=None)
    if not stuck and wake_at == step.wake_at:
        return step
    return replace(
        step,
        retiring={m: s for m, s in step.retiring.items() if m not in stuck},
        delete=tuple(sorted({*step.delete, *stuck})),
        reasons=reasons,
        wake_at=wake_at,
        stuck=tuple(stuck),
    )
