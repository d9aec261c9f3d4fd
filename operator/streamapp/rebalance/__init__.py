"""The pure rebalance engine (docs/design.md, "The engine's invariants"): no Kubernetes, no clock, no I/O.

Import what you need from here; the submodules are the engine's internals.
"""

from streamapp.rebalance.config import PROTOCOLS, AppConfig, ConfigError, Protocol, RebalanceConfig
from streamapp.rebalance.engine import plan
from streamapp.rebalance.model import (
    Assignment,
    Event,
    EventKind,
    LostMember,
    MemberTarget,
    MemberView,
    Plan,
    Reservation,
    TaskAssignment,
    member_targets,
)

__all__ = [
    "PROTOCOLS",
    "AppConfig",
    "Assignment",
    "ConfigError",
    "Event",
    "EventKind",
    "LostMember",
    "MemberTarget",
    "MemberView",
    "Plan",
    "Protocol",
    "RebalanceConfig",
    "Reservation",
    "TaskAssignment",
    "member_targets",
    "plan",
]
