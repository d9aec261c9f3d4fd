"""`spec.rebalance` on the wire: every key's type, default, range and spelling, stated once.

`streamapp.rebalance.config.RebalanceConfig` is the block in the engine's units (seconds, counts) and
owns the defaults. `RebalanceSpec` is the only place the block is checked: the CRD's schema and CEL rules
are generated from it, and the operator and the simulator decode through it (`REBALANCE`), so what the
API server would refuse never reaches the engine, and the engine states no check of its own.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from streamapp.api.codec import decode
from streamapp.api.fields import Rule, prop, prop_of, wire_name
from streamapp.api.schema import model_schema
from streamapp.api.wiremodel import Model
from streamapp.rebalance.config import LostTaskRecovery, Protocol, RebalanceConfig
from streamapp.units import MAX_DURATION_SECONDS, UnitError, parse_duration

DURATION_PATTERN = "^([0-9]+([.][0-9]+)?(ms|s|m|h))+$"
DURATION_MAX_LENGTH = 32
MAX_DURATION = "720h"
_DEFAULTS = RebalanceConfig().to_spec()


def at_most(key: str) -> Rule:
    """A duration no longer than `MAX_DURATION_SECONDS` (CEL parses the same Go spelling)."""
    return Rule(
        f"duration(self) <= duration('{MAX_DURATION}')",
        f"{key} must be at most {MAX_DURATION}",
        lambda value: _seconds(value) <= MAX_DURATION_SECONDS,
    )


def _seconds(value: str) -> float:
    try:
        return parse_duration(value)
    except UnitError:
        return MAX_DURATION_SECONDS + 1


def _positive(key: str) -> Rule:
    """A duration that matched DURATION_PATTERN is > 0 iff it has a non-zero digit."""
    return Rule(
        "self.matches('[1-9]')", f"{key} must be > 0", lambda value: re.search("[1-9]", value) is not None
    )


def _duration(key: str, description: str, positive: bool = False) -> dict[str, Any]:
    """A Go-style duration (`30s`, `5m`, `1h30m`) of at most 720h."""
    rules = ((_positive(key),) if positive else ()) + (at_most(key),)
    return prop(
        description,
        pattern=DURATION_PATTERN,
        pattern_message=f"{key} must be a duration such as 30s, 5m or 1h30m",
        max_length=DURATION_MAX_LENGTH,
        rules=rules,
    )


@dataclass(frozen=True)
class RebalanceSpec(Model):
    """How tasks move between members; the same block as a simulator scenario's."""

    PATH = "spec.rebalance"

    protocol: Protocol = field(
        default=_DEFAULTS["protocol"],
        metadata=prop(
            "How tasks move: streamapp (warmups, cooperative handoff, delayed reassignment), "
            "cooperative (KIP-415/429 style) or eager (stop-the-world baseline)."
        ),
    )
    scheduled_rebalance_max_delay: str = field(
        default=_DEFAULTS["scheduledRebalanceMaxDelay"],
        metadata=_duration(
            "scheduledRebalanceMaxDelay",
            "How long a lost member's tasks are reserved for it before they are reassigned; a pod that "
            "restarts within it keeps its tasks and its local state.",
        ),
    )
    acceptable_recovery_lag: int = field(
        default=_DEFAULTS["acceptableRecoveryLag"],
        metadata=prop("A copy with at most this many records left to apply counts as caught up.", minimum=0),
    )
    handoff_lag: int = field(
        default=_DEFAULTS["handoffLag"],
        metadata=prop(
            "Records a successor may still lack when a planned handoff revokes the owner; 0 makes the "
            "handoff pause only the owner's final batch.",
            minimum=0,
        ),
    )
    max_warmup_replicas: int = field(
        default=_DEFAULTS["maxWarmupReplicas"],
        metadata=prop(
            "At most this many warmup copies catch up at once on each member that receives tasks (a warmup "
            "loads its destination), so a scale-out to several members warms on all of them.",
            minimum=1,
        ),
    )
    max_warmup_replicas_total: int = field(
        default=_DEFAULTS["maxWarmupReplicasTotal"],
        metadata=prop(
            "At most this many warmup copies catch up at once in the whole app (a cap on the restore traffic "
            "from the shared store); 0 means no cap beyond maxWarmupReplicas per member.",
            minimum=0,
        ),
    )
    probing_rebalance_interval: str = field(
        default=_DEFAULTS["probingRebalanceInterval"],
        metadata=_duration(
            "probingRebalanceInterval",
            "Fallback re-check of warmups; promotion is event-driven.",
            positive=True,
        ),
    )
    standby_replicas: int = field(
        default=_DEFAULTS["standbyReplicas"],
        metadata=prop("Hot copies per task for instant failover; fewer than replicas.", minimum=0),
    )
    failover_to_standby: bool = field(
        default=_DEFAULTS["failoverToStandby"],
        metadata=prop(
            "A caught-up standby takes over a lost member's task at once instead of waiting for the delay."
        ),
    )
    drain_on_scale_in: bool = field(
        default=_DEFAULTS["drainOnScaleIn"],
        metadata=prop("Members removed by scale-in keep processing until their tasks have warm successors."),
    )
    revocation_timeout: str = field(
        default=_DEFAULTS["revocationTimeout"],
        metadata=_duration(
            "revocationTimeout",
            "How long a revocation waits for the owner's acknowledgement; a member that has not let go by "
            "then is treated as lost and its pod replaced (epoch fencing keeps the handover safe).",
            positive=True,
        ),
    )
    lost_task_recovery: LostTaskRecovery = field(
        default=_DEFAULTS["lostTaskRecovery"],
        metadata=prop(
            "What happens to a lost member's tasks: auto restores them elsewhere at once when that is "
            "expected to be quicker than the member's return (state size over the measured restore rate, "
            "against the member's measured restart) and promotes whichever copy is ready first; delay holds "
            "them for the member until scheduledRebalanceMaxDelay (pre-warming from half of it), Kafka's "
            "fixed delay."
        ),
    )
    flap_window: str = field(
        default=_DEFAULTS["flapWindow"],
        metadata=_duration(
            "flapWindow",
            "A member lost twice within this window is flapping: it is not trusted to return (its tasks are "
            "restored elsewhere while it is away, handed off it while it is up) until it has stayed up this "
            "long; 0 turns the damping off.",
        ),
    )
    batch_timeout: str = field(
        default=_DEFAULTS["batchTimeout"],
        metadata=_duration(
            "batchTimeout",
            "How long one batch round of a member may run before the member counts as stuck (a Spark that "
            "hangs while its pod stays ready) and its pod is replaced, at most rollingUpdate.maxUnavailable "
            "at a time; 0 turns it off. Longer than the slowest batch.",
        ),
    )

    def config(self) -> RebalanceConfig:
        """The block in the engine's units: durations in seconds."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for f in dataclasses.fields(self):
            if prop_of(f).pattern == DURATION_PATTERN:
                values[f.name] = parse_duration(values[f.name], wire_name(f))
        return RebalanceConfig(**values)


class RebalanceCodec:
    """The `Codec` of `spec.rebalance`: checked as a `RebalanceSpec`, held as the engine's `RebalanceConfig`."""

    def schema(self) -> dict[str, Any]:
        """The object schema; every key has its default, so the API server fills in the whole block."""
        return model_schema(RebalanceSpec)

    def decode(self, value: object, path: str) -> RebalanceConfig:
        """The engine's config of a block that passed every rule the API server runs."""
        return decode(RebalanceSpec, value, path).config()

    def encode(self, value: RebalanceConfig) -> dict[str, Any]:
        """The camelCase block with Go-style durations."""
        return value.to_spec()


REBALANCE = RebalanceCodec()
