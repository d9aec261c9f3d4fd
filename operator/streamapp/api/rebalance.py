"""`spec.rebalance` on the wire: the schema of `RebalanceConfig`, derived from the engine's own dataclass.

`streamapp.rebalance.config.RebalanceConfig` owns the block's keys, defaults and semantic checks (the
simulator reads the same block). This module adds only what the API server needs to check it before the
operator sees it: wire types, the duration spelling and the numeric ranges as CEL rules. The ranges are
written here again in CEL; a test asserts each one agrees with `RebalanceConfig`'s own validation.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping
from typing import Any, Literal

from streamapp.api.fields import Prop, Rule, ValidationError
from streamapp.rebalance.config import MAX_DURATION_SECONDS, ConfigError, RebalanceConfig, parse_duration

DURATION_PATTERN = "^([0-9]+([.][0-9]+)?(ms|s|m|h))+$"
DURATION_MAX_LENGTH = 32
MAX_DURATION = "720h"

# Lower bounds `RebalanceConfig.__post_init__` enforces, as CEL rules for the API server.
MINIMUMS: dict[str, int] = {
    "acceptableRecoveryLag": 0,
    "handoffLag": 0,
    "maxWarmupReplicas": 1,
    "maxWarmupReplicasTotal": 0,
    "standbyReplicas": 0,
}
# Durations RebalanceConfig requires to be > 0.
POSITIVE_DURATIONS = ("probingRebalanceInterval", "revocationTimeout")

_DESCRIPTIONS: dict[str, str] = {
    "protocol": "How tasks move: streamapp (warmups, cooperative handoff, delayed reassignment), "
    "cooperative (KIP-415/429 style) or eager (stop-the-world baseline).",
    "scheduledRebalanceMaxDelay": "How long a lost member's tasks are reserved for it before they are "
    "reassigned; a pod that restarts within it keeps its tasks and its local state.",
    "acceptableRecoveryLag": "A copy with at most this many records left to apply counts as caught up.",
    "handoffLag": "Records a successor may still lack when a planned handoff revokes the owner; 0 makes "
    "the handoff pause only the owner's final batch.",
    "maxWarmupReplicas": "At most this many warmup copies catch up at once on each member that receives "
    "tasks (a warmup loads its destination), so a scale-out to several members warms on all of them.",
    "maxWarmupReplicasTotal": "At most this many warmup copies catch up at once in the whole app (a cap on "
    "the restore traffic from the shared store); 0 means no cap beyond maxWarmupReplicas per member.",
    "probingRebalanceInterval": "Fallback re-check of warmups; promotion is event-driven.",
    "standbyReplicas": "Hot copies per task for instant failover; fewer than replicas.",
    "failoverToStandby": "A caught-up standby takes over a lost member's task at once instead of waiting "
    "for the delay.",
    "drainOnScaleIn": "Members removed by scale-in keep processing until their tasks have warm successors.",
    "lostTaskRecovery": "What happens to a lost member's tasks: auto restores them elsewhere at once when "
    "that is expected to be quicker than the member's return (state size over the measured restore rate, "
    "against the member's measured restart) and promotes whichever copy is ready first; delay holds them "
    "for the member until scheduledRebalanceMaxDelay (pre-warming from half of it), Kafka's fixed delay.",
    "flapWindow": "A member lost twice within this window is flapping: it is not trusted to return (its "
    "tasks are restored elsewhere while it is away, handed off it while it is up) until it has stayed up "
    "this long; 0 turns the damping off.",
    "batchTimeout": "How long one batch round of a member may run before the member counts as stuck (a "
    "Spark that hangs while its pod stays ready) and its pod is replaced, at most "
    "rollingUpdate.maxUnavailable at a time; 0 turns it off. Longer than the slowest batch.",
    "revocationTimeout": "How long a revocation waits for the owner's acknowledgement; a member that has "
    "not let go by then is treated as lost and its pod replaced (epoch fencing keeps the handover safe).",
}


def wire_fields() -> list[tuple[str, Any, Any]]:
    """(camelCase key, Python type, wire default) of every RebalanceConfig field, in declaration order."""
    defaults = RebalanceConfig().to_spec()
    hints = typing.get_type_hints(RebalanceConfig)
    fields = dataclasses.fields(RebalanceConfig)
    return [(key, hints[f.name], defaults[key]) for key, f in zip(defaults, fields, strict=True)]


def _positive(key: str) -> Rule:
    """A duration that matched DURATION_PATTERN is > 0 iff it has a non-zero digit."""
    return Rule(
        "self.matches('[1-9]')", f"{key} must be > 0", lambda value: re.search("[1-9]", value) is not None
    )


def _key_prop(key: str, duration: bool) -> Prop:
    """What the API server checks for one key: its range, or its duration spelling and bound."""
    rules = ((_positive(key),) if key in POSITIVE_DURATIONS else ()) + ((at_most(key),) if duration else ())
    return Prop(
        _DESCRIPTIONS[key],
        minimum=MINIMUMS.get(key),
        pattern=DURATION_PATTERN if duration else None,
        pattern_message=f"{key} must be a duration such as 30s, 5m or 1h30m",
        max_length=DURATION_MAX_LENGTH if duration else None,
        rules=rules,
    )


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
    except ConfigError:
        return MAX_DURATION_SECONDS + 1


def _key_schema(key: str, tp: Any, default: Any) -> tuple[dict[str, Any], tuple[Rule, ...]]:
    """The schema of one key and the rules in it; the wire type follows from the default's type."""
    schema: dict[str, Any] = {}
    if typing.get_origin(tp) is Literal:
        schema.update(type="string", enum=list(typing.get_args(tp)))
    elif isinstance(default, bool):
        schema["type"] = "boolean"
    elif isinstance(default, int):
        schema.update(type="integer", format="int64")
    else:
        schema["type"] = "string"
    meta = _key_prop(key, duration=schema["type"] == "string" and "enum" not in schema)
    schema.update(description=meta.description, default=default)
    if meta.max_length is not None:
        schema["maxLength"] = meta.max_length
    rules = meta.all_rules(key)
    if rules:
        schema["x-kubernetes-validations"] = [rule.to_schema() for rule in rules]
    return schema, rules


class RebalanceCodec:
    """The `Codec` of `spec.rebalance`: wire checks here, semantics in `RebalanceConfig.from_spec`."""

    def schema(self) -> dict[str, Any]:
        """The object schema; every key has its default, so the API server fills in the whole block."""
        properties = {key: _key_schema(key, tp, default)[0] for key, tp, default in wire_fields()}
        return {"type": "object", "properties": properties}

    def decode(self, value: object, path: str) -> RebalanceConfig:
        """Check wire types and rules as the API server would, then let RebalanceConfig parse the block."""
        if not isinstance(value, Mapping):
            raise ValidationError(path, f"expected an object, got {value!r}")
        known = {key: (tp, default) for key, tp, default in wire_fields()}
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValidationError(path, f"unknown field(s) {', '.join(unknown)}")
        for key, raw in value.items():
            schema, rules = _key_schema(key, *known[key])
            _check_type(schema, raw, f"{path}.{key}")
            for rule in rules:
                if rule.check is not None and not rule.check(raw):
                    raise ValidationError(f"{path}.{key}", rule.message)
        try:
            return RebalanceConfig.from_spec(value)
        except ConfigError as error:
            key, _, problem = str(error).partition(": ")
            raise ValidationError(f"{path}.{key}", problem) from None

    def encode(self, value: RebalanceConfig) -> dict[str, Any]:
        """The camelCase block with Go-style durations."""
        return value.to_spec()


_WIRE_TYPES: dict[str, tuple[type, str]] = {
    "string": (str, "a string"),
    "integer": (int, "an integer"),
    "boolean": (bool, "true or false"),
}


def _check_type(schema: dict[str, Any], raw: object, path: str) -> None:
    expected, spelled = _WIRE_TYPES[schema["type"]]
    if not isinstance(raw, expected) or (expected is int and isinstance(raw, bool)):
        raise ValidationError(path, f"expected {spelled}, got {raw!r}")
    if "enum" in schema and raw not in schema["enum"]:
        raise ValidationError(path, f"expected one of {', '.join(schema['enum'])}, got {raw!r}")


REBALANCE = RebalanceCodec()
