"""Status conditions in the standard `metav1.Condition` shape, and the one way to update them.

Tools (`kubectl wait --for=condition=Ready`, Argo CD, GitOps health checks) read conditions in this exact
shape; `lastTransitionTime` changes only when `status` does, so it tells how long a state has held.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Literal

from streamapp.api.fields import prop
from streamapp.api.wiremodel import Model

ConditionType = Literal["Ready", "Rebalancing", "Degraded", "Progressing"]
"""The condition types the operator sets; a status may hold others (`Condition.type` is open)."""
OWN_TYPES: frozenset[str] = frozenset(typing.get_args(ConditionType))
ConditionStatus = Literal["True", "False", "Unknown"]

REASON_PATTERN = "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


@dataclass(frozen=True, kw_only=True)
class Condition(Model):
    """One aspect of the object's state (metav1.Condition)."""

    type: str = field(
        metadata=prop(
            "Ready: every task is processed by a caught-up owner; Rebalancing: a handoff is in flight; "
            "Degraded: tasks are reserved for lost members or unassigned; Progressing: a rolling update "
            "is replacing member pods (reason RollingUpdate, RolloutPaused) or is complete. Other types "
            "(set by other tools, or by another version of the operator) are kept as they are.",
            max_length=316,
        )
    )
    status: ConditionStatus = field(metadata=prop("True, False or Unknown."))
    reason: str = field(
        metadata=prop(
            "CamelCase reason for the last transition, for machines.",
            pattern=REASON_PATTERN,
            pattern_message="reason must be CamelCase, e.g. TasksWarming",
            max_length=1024,
        )
    )
    message: str = field(metadata=prop("Human-readable details.", max_length=32768))
    last_transition_time: str = field(metadata=prop("When status last changed.", format="date-time"))
    observed_generation: int | None = field(
        default=None, metadata=prop("metadata.generation the condition was computed from.", minimum=0)
    )


def set_condition(conditions: tuple[Condition, ...], new: Condition) -> tuple[Condition, ...]:
    """Put `new` in place of the condition of its type (or append it), keeping the old lastTransitionTime
    when the status did not change."""
    previous = next((c for c in conditions if c.type == new.type), None)
    if previous is None:
        return (*conditions, new)
    if previous.status == new.status:
        new = dataclasses.replace(new, last_transition_time=previous.last_transition_time)
    return tuple(new if c is previous else c for c in conditions)
