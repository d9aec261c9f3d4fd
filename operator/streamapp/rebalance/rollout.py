"""Rolling updates: which member's pod is replaced next, and when (a Deployment's rollout, task-aware).

Every member pod carries the revision (a hash) of the spec it was made from. When the app's spec
changes, members whose pod has another revision are replaced, at most `maxUnavailable` at a time
counting members whose pod is missing or not ready. With the `handoff` strategy a member is first
marked *retiring*: the engine treats it like a draining member, so its active tasks move to caught-up
copies elsewhere through the normal warmup → revoke → ack → assign path, and its pod is deleted only
once it owns no active task — or when `handoffTimeout` has passed since the handoff began, so a
handoff that cannot finish never stalls the rollout for good. `inPlace` deletes the pod at once and
its tasks wait for it under the usual reservation. Pure: the shell persists when a handoff began
(on the pod) and passes the clock in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from streamapp.rebalance.config import ConfigError, parse_duration

Strategy = Literal["handoff", "inPlace", "auto"]
STRATEGIES: tuple[Strategy, ...] = ("handoff", "inPlace", "auto")


@dataclass(frozen=True)
class RolloutConfig:
    """The `spec.rollingUpdate` block.

    `auto` hands off when the protocol warms successors (`streamapp`) and another ready member can
    take the tasks: a warm handoff costs one batch per moved task, a restart in place at least a pod
    start. It restarts in place otherwise: a single member has nowhere to hand off to, and the
    cooperative and eager protocols would move the tasks cold, which costs more than waiting for
    the member's own pod. `handoff` forces the handoff whenever another member is ready.
    """

    strategy: Strategy = "auto"
    max_unavailable: int = 1
    paused: bool = False
    handoff_timeout: float = 600.0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy: must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        if self.max_unavailable < 1:
            raise ConfigError(f"maxUnavailable: must be >= 1, got {self.max_unavailable}")

    @staticmethod
    def from_spec(spec: Mapping[str, Any] | None) -> RolloutConfig:
        """Parse the camelCase block (durations as `10m`); missing keys take their defaults."""
        spec = spec or {}
        unknown = set(spec) - {"strategy", "maxUnavailable", "paused", "handoffTimeout"}
        if unknown:
            raise ConfigError(f"rollingUpdate: unknown keys {', '.join(sorted(unknown))}")
        default = RolloutConfig()
        return RolloutConfig(
            strategy=cast(Strategy, spec.get("strategy", default.strategy)),
            max_unavailable=int(spec.get("maxUnavailable", default.max_unavailable)),
            paused=bool(spec.get("paused", default.paused)),
            handoff_timeout=parse_duration(
                spec.get("handoffTimeout", default.handoff_timeout), "rollingUpdate.handoffTimeout"
            ),
        )


@dataclass(frozen=True)
class MemberPod:
    """A member's pod as observed: its revision, readiness, and when its handoff began (if it did)."""

    member: int
    revision: str
    ready: bool
    retiring_since: float | None = None


@dataclass(frozen=True)
class RolloutStep:
    """What the shell does now: mark `retiring` members (member → when their handoff began), delete
    the pods in `delete`, and look again at `wake_at` (a handoff timeout) if nothing else wakes it."""

    retiring: Mapping[int, float]
    delete: tuple[int, ...]
    updated: int
    outdated: tuple[int, ...]
    wake_at: float | None = None

    @property
    def rolling(self) -> bool:
        """Whether any wanted member still runs a pod of another revision."""
        return bool(self.outdated)


def rollout_step(
    pods: Mapping[int, MemberPod],
    replicas: int,
    revision: str,
    active: Mapping[int, int],
    config: RolloutConfig,
    now: float,
    warm: bool = True,
) -> RolloutStep:
    """The next step of the rollout to `revision`; `active` counts each member's active tasks
    (revoking ones included: a task is not handed off until its owner let go); `warm` says whether
    the protocol warms successors before a handoff."""
    wanted = [m for m in range(replicas) if m in pods]
    outdated = tuple(m for m in wanted if pods[m].revision != revision)
    updated = len(wanted) - len(outdated)
    if config.paused or not outdated:
        return RolloutStep({}, (), updated, outdated)
    delete = [m for m in outdated if not pods[m].ready]
    busy = replicas - sum(1 for m in wanted if pods[m].ready)
    retiring: dict[int, float] = {}
    for member in sorted((m for m in outdated if pods[m].ready), key=lambda m: _order(pods[m])):
        since = pods[member].retiring_since
        if since is None and busy >= config.max_unavailable:
            continue
        busy += 1
        timed_out = since is not None and now >= since + config.handoff_timeout
        handing_off = _hands_off(member, pods, retiring, replicas, config.strategy, warm)
        if handing_off and active.get(member, 0) > 0 and not timed_out:
            retiring[member] = now if since is None else since
        else:
            delete.append(member)
    deadlines = [since + config.handoff_timeout for since in retiring.values()]
    return RolloutStep(retiring, tuple(sorted(delete)), updated, outdated, min(deadlines, default=None))


def _order(pod: MemberPod) -> tuple[bool, int]:
    """Handoffs under way first (they are resumed, not restarted), then the highest id, as a
    StatefulSet does."""
    return (pod.retiring_since is None, -pod.member)


def _hands_off(
    member: int,
    pods: Mapping[int, MemberPod],
    retiring: Mapping[int, float],
    replicas: int,
    strategy: Strategy,
    warm: bool,
) -> bool:
    """Whether `member` hands its tasks off before its pod goes: asked for (or `auto` with a warm
    protocol) and some other ready member stays to take them."""
    if strategy == "inPlace" or (strategy == "auto" and not warm):
        return False
    return any(
        pods[m].ready and m not in retiring and pods[m].retiring_since is None
        for m in range(replicas)
        if m != member and m in pods
    )
