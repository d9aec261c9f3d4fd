"""`spec.rollingUpdate` on the wire: how member pods are replaced when what they are made from changes.

The engine-side value (`streamapp.rebalance.rollout.RolloutConfig`) holds the block in the engine's units
and its defaults; this model is the only place the block is checked (the CRD's rules come from it, and
the operator and the simulator decode through it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from streamapp.api.fields import prop
from streamapp.api.rebalance import DURATION_MAX_LENGTH, DURATION_PATTERN, at_most
from streamapp.api.wiremodel import Model
from streamapp.rebalance.rollout import RolloutConfig, Strategy
from streamapp.units import format_duration, parse_duration

_DEFAULTS = RolloutConfig()


@dataclass(frozen=True, kw_only=True)
class RollingUpdate(Model):
    """Members whose pod was made from an older spec are replaced, at most `maxUnavailable` at a time."""

    PATH: ClassVar[str] = "spec.rollingUpdate"

    strategy: Strategy = field(
        default=_DEFAULTS.strategy,
        metadata=prop(
            "handoff: before a member's pod is deleted its active tasks move to caught-up copies on other "
            "members (standbys at once, otherwise warmups), so no task stops for longer than one batch; "
            "inPlace: the pod is deleted at once and its tasks wait for it (reserved, with its volume); "
            "auto: per member, inPlace when no other member is ready, when the protocol is not streamapp, "
            "or when the member keeps its state on a claim and either warming its tasks on the other "
            "members (their size over the others' measured restore rate) would take over twice its "
            "restart, or its measured restart (status.members[].restartSeconds) is below the measured "
            "handoff (status.handoffSeconds); handoff otherwise, including while these are unknown."
        ),
    )
    max_unavailable: int = field(
        default=_DEFAULTS.max_unavailable,
        metadata=prop(
            "Members being replaced at once, counting members whose pod is missing or not ready.",
            minimum=1,
        ),
    )
    paused: bool = field(
        default=_DEFAULTS.paused,
        metadata=prop("Stop the rollout: no pod is deleted and no handoff starts until unpaused."),
    )
    handoff_timeout: str = field(
        default=format_duration(_DEFAULTS.handoff_timeout),
        metadata=prop(
            "How long a member's handoff may take before its pod is deleted anyway (its remaining tasks "
            "then wait for it, as in inPlace); one its successors are measured to finish within another "
            "handoffTimeout keeps its pod until then, at most twice as long.",
            pattern=DURATION_PATTERN,
            pattern_message="handoffTimeout must be a duration such as 30s, 5m or 1h30m",
            max_length=DURATION_MAX_LENGTH,
            rules=(at_most("handoffTimeout"),),
        ),
    )

    def config(self) -> RolloutConfig:
        """The engine-side value."""
        return RolloutConfig(
            strategy=self.strategy,
            max_unavailable=self.max_unavailable,
            paused=self.paused,
            handoff_timeout=parse_duration(self.handoff_timeout, "rollingUpdate.handoffTimeout"),
        )
