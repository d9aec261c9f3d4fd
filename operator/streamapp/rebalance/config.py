"""Configuration of an app's rebalancing in the engine's units, and the app's shape.

`RebalanceConfig` is the `spec.rebalance` block as the engine reads it (seconds, counts) and owns its
defaults; the block's wire form and every check of it are `streamapp.api.rebalance.RebalanceSpec`, which
both the operator and the simulator decode through. Durations and quantities are spelled as in `streamapp.units`.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from streamapp.units import format_duration

Protocol = Literal["eager", "cooperative", "streamapp"]
PROTOCOLS: tuple[Protocol, ...] = typing.get_args(Protocol)
LostTaskRecovery = Literal["auto", "delay"]


class ConfigError(ValueError):
    """A rebalance configuration value is missing, malformed or out of range."""


@dataclass(frozen=True)
class RebalanceConfig:
    """How an app's tasks move between members (`spec.rebalance`, docs/api.md).

    `handoff_lag` is this project's refinement of KIP-441: a *planned* move away from a live owner waits
    until the successor's reported lag is at most `handoff_lag` records, so the pause at handoff is only
    the owner's final batch; `acceptable_recovery_lag` still decides who counts as caught up (may take a
    task that nobody processes, may be promoted at the probing re-check when `handoff_lag` is never met).

    `revocation_timeout` bounds how long a revocation waits for the owner's acknowledgement (Kafka's
    `max.poll.interval.ms`, KIP-848's rebalance timeout, both 5 minutes by default): a member that has
    not let go by then is declared lost and its pod replaced, so a deaf or stuck executor cannot stall
    a rebalance for good. It must exceed the longest batch plus a pod start, hence minutes, not seconds.

    `max_warmup_replicas` is counted per destination member, unlike Kafka's group-wide
    `max.warmup.replicas`, so the migration rate grows with the members receiving tasks while no member
    restores more than that many at once; `max_warmup_replicas_total` (0: none) caps the app's sum
    (see `budget`).

    `lost_task_recovery` says what the state-aware protocol does with a lost member's tasks: `auto`
    restores them elsewhere at once when that is expected to be quicker than the member's return and
    promotes whichever copy is ready first (`recovery`); `delay` holds them for the member until
    `scheduled_rebalance_max_delay`, pre-warming from half of it unless the member is visibly
    restarting (the behaviour before `auto`, Kafka Connect's fixed delay plus pre-warming). Either way
    the delay is the upper bound of a member's reservation.

    `batch_timeout` (0: off) is how long one batch round may run before its member counts as stuck
    and its pod is replaced (`stuck`): Kafka's `max.poll.interval.ms` for an executor whose Spark hangs
    while its pod stays ready and its reports go on.
    """

    # Every float is a duration in seconds (`to_spec` spells them the Go way).
    protocol: Protocol = "streamapp"
    scheduled_rebalance_max_delay: float = 300.0
    acceptable_recovery_lag: int = 10_000
    handoff_lag: int = 0
    max_warmup_replicas: int = 2
    max_warmup_replicas_total: int = 0
    probing_rebalance_interval: float = 600.0
    standby_replicas: int = 0
    failover_to_standby: bool = True
    drain_on_scale_in: bool = True
    revocation_timeout: float = 300.0
    lost_task_recovery: LostTaskRecovery = "auto"
    flap_window: float = 600.0
    batch_timeout: float = 300.0

    @property
    def state_aware(self) -> bool:
        """The protocol that knows about state (`streamapp`): warmups before handoffs, pre-warming and
        restores of lost members' tasks, failover to standbys, damping of flapping members. The two
        baselines (`eager`, `cooperative`) move tasks cold."""
        return self.protocol == "streamapp"

    def lag_thresholds(self) -> tuple[int, ...]:
        """The copy lags a plan changes on (a handoff's `handoff_lag`, caught-up's
        `acceptable_recovery_lag`): an executor must report a copy reaching one without delay."""
        return tuple(sorted({self.handoff_lag, self.acceptable_recovery_lag}))

    def to_spec(self) -> dict[str, Any]:
        """The camelCase block with durations spelled the Kubernetes way: the wire defaults, and what the
        operator writes back."""
        durations = {name for name, tp in typing.get_type_hints(RebalanceConfig).items() if tp is float}
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[_camel(f.name)] = format_duration(value) if f.name in durations else value
        return out


@dataclass(frozen=True)
class AppConfig:
    """The shape of one app as the engine sees it: how many tasks, how many members, how they move."""

    partitions: int
    replicas: int
    rebalance: RebalanceConfig = field(default_factory=RebalanceConfig)

    def __post_init__(self) -> None:
        _require(self.partitions >= 1, "partitions", "must be >= 1")
        _require(self.replicas >= 0, "replicas", "must be >= 0")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {message}")
