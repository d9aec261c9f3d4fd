"""`spec.autoscaling` on the wire: the operator's own autoscaler, off by default.

The engine-side value (`streamapp.rebalance.autoscaler.AutoscalerConfig`) holds the block in the engine's
units and its defaults; this model is the only place the block is checked (the CRD's rules come from it,
and the operator and the simulator decode through it). Rules that need the rest of the spec (members
at most one per task and at most spec.replicas' bound, more members than standbys) are the spec's
(`api/streamapp.py`).

With `enabled` the operator owns `spec.replicas`: it writes the size it decides through the /scale
subresource, as an HPA would. An HPA or a KEDA ScaledObject on the same app would take turns with it,
so point neither at an app that autoscales itself; a size someone else writes is taken as the current
size and the next decision starts from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from streamapp.api.fields import Rule, prop
from streamapp.api.rebalance import DURATION_MAX_LENGTH, DURATION_PATTERN, at_most
from streamapp.api.wiremodel import Model
from streamapp.rebalance.autoscaler import AutoscalerConfig
from streamapp.units import format_duration, parse_duration

_DEFAULTS = AutoscalerConfig()
MAX_LAG_SECONDS = 86_400


@dataclass(frozen=True, kw_only=True)
class AutoscalingTarget(Model):
    """What the autoscaler sizes the app for: how busy its busiest member may be, and, optionally, how
    far behind its input it may fall."""

    utilization: int = field(
        default=round(_DEFAULTS.utilization * 100),
        metadata=prop(
            "Percent of its true processing rate (records per second of busy time, as each member measures "
            "it) the busiest member may use at the current input rate: the app gets the fewest members "
            "that keep it there. The rest is room for input bursts and for restores.",
            minimum=1,
            maximum=100,
        ),
    )
    lag_seconds: int | None = field(
        default=None,
        metadata=prop(
            "The input lag the app should stay within, in seconds of processing (the busiest member's "
            "share of the records waiting over its true rate). A backlog beyond it gets the size that "
            "brings the lag back within it for the fewest member-seconds: its members until then (new "
            "ones help only once their pod start and restores are done, and the lag that builds "
            "meanwhile counts), their way back down, and each second over it priced at maxReplicas "
            "members; no scale-in while the lag is over it. Unset: no lag target.",
            minimum=1,
            maximum=MAX_LAG_SECONDS,
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Autoscaling(Model):
    """The operator's own autoscaler: members computed from the input rate and each member's measured
    processing rate; each decision waits until the warmups it caused have caught up (their lag is not
    demand); scale-in only with headroom, through the warm handoff; a scale-out that did not raise
    throughput is not repeated. Off by default (an HPA or KEDA on /scale works as before)."""

    PATH: ClassVar[str] = "spec.autoscaling"
    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "!has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
            "autoscaling.minReplicas must be at most maxReplicas",
            lambda a: a.max_replicas is None or a.min_replicas <= a.max_replicas,
            ".minReplicas",
        ),
    )

    enabled: bool = field(
        default=_DEFAULTS.enabled,
        metadata=prop(
            "Let the operator set spec.replicas (through /scale). Do not point an HPA or a KEDA "
            "ScaledObject at the same app: they would take turns writing it."
        ),
    )
    min_replicas: int = field(
        default=_DEFAULTS.min_replicas,
        metadata=prop(
            "The fewest members the autoscaler keeps; at most spec.partitions, and more than "
            "rebalance.standbyReplicas.",
            minimum=1,
        ),
    )
    max_replicas: int | None = field(
        default=None,
        metadata=prop(
            "The most members the autoscaler makes; at most spec.partitions (a member beyond that gets no "
            "task). Unset: spec.partitions.",
            minimum=1,
        ),
    )
    target: AutoscalingTarget = field(
        default_factory=AutoscalingTarget, metadata=prop("What the app is sized for.")
    )
    scale_in_headroom: int = field(
        default=round(_DEFAULTS.scale_in_headroom * 100),
        metadata=prop(
            "Percent of the load a scale-in must leave spare below the utilization target, so that a rate "
            "near a boundary does not scale in and straight back out. A scale-in also waits until the lag "
            "is within target and the smaller size has sufficed for as long as its handoff takes (the "
            "tasks' restores at the measured rate).",
            minimum=0,
            maximum=100,
        ),
    )
    settle_timeout: str = field(
        default=format_duration(_DEFAULTS.settle_timeout),
        metadata=prop(
            "The longest a decision waits on its own effects (new members' pods and warmups, removed "
            "members' handoffs) before the next decision may be taken anyway.",
            pattern=DURATION_PATTERN,
            pattern_message="settleTimeout must be a duration such as 30s, 5m or 1h30m",
            max_length=DURATION_MAX_LENGTH,
            rules=(
                at_most("settleTimeout"),
                Rule(
                    "self.matches('[1-9]')",
                    "settleTimeout must be > 0",
                    lambda v: any(c in "123456789" for c in v),
                ),
            ),
        ),
    )

    def config(self) -> AutoscalerConfig:
        """The engine-side value."""
        return AutoscalerConfig(
            enabled=self.enabled,
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            utilization=self.target.utilization / 100,
            lag_seconds=None if self.target.lag_seconds is None else float(self.target.lag_seconds),
            scale_in_headroom=self.scale_in_headroom / 100,
            settle_timeout=parse_duration(self.settle_timeout, "autoscaling.settleTimeout"),
        )
