"""KEDA's Prometheus scaler driving the Kubernetes HPA on a StreamApp's /scale, as a model to compare with.

What is modelled, and from where (docs/simulator.md, "KEDA and the HPA"):

- **The metric path.** The operator exports the app's input lag (`status.inputLag`, from the members'
  reports); Prometheus scrapes it every `scrape_interval` (the chart's ServiceMonitor: 30 s). KEDA's
  metrics server answers each of the HPA's requests by running the trigger's query then, so the HPA
  sees Prometheus's latest sample; a ScaledObject's `pollingInterval` paces only KEDA's own loop, which
  activates a target from zero (not used here: `minReplicaCount` ≥ 1).
- **The HPA's formula.** KEDA declares the query's value as an external metric with an `AverageValue`
  target of `threshold`. Every sync (15 s) the HPA divides the value by the target times the scale's
  `status.replicas`; outside a tolerance of 0.1 around 1 it proposes `ceil(value / threshold)`,
  within it the current count.
- **Behavior.** Scale-up as the HPA's defaults: no stabilization, at most the larger of +100 % and +4
  pods per 15 s. Scale-down as the ScaledObject sets it (the project's sample: the highest proposal
  of the last 600 s, at most one pod per 300 s). The stabilization keeps every proposal with its time
  and takes the lowest of the scale-up window (rising) or the highest of the scale-down window
  (falling); the rate limits count the changes made within each policy's period, both as the HPA
  controller does. `minReplicas` and `maxReplicas` bound the result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

PolicyKind = Literal["Pods", "Percent"]


@dataclass(frozen=True)
class Policy:
    """At most `value` pods (or percent) per `period` seconds."""

    kind: PolicyKind
    value: int
    period: float


@dataclass(frozen=True)
class Rules:
    """One direction's behavior: the stabilization window and the rate policies (the larger change of
    them is allowed, the HPA's default `selectPolicy: Max`)."""

    window: float
    policies: tuple[Policy, ...]


SCALE_UP_DEFAULT = Rules(0.0, (Policy("Percent", 100, 15.0), Policy("Pods", 4, 15.0)))
SCALE_DOWN_DEFAULT = Rules(300.0, (Policy("Percent", 100, 15.0),))
SYNC_SECONDS = 15.0
TOLERANCE = 0.1


@dataclass(frozen=True)
class KedaHpaConfig:
    """A ScaledObject with one Prometheus trigger, and the HPA settings it leads to."""

    min_replicas: int = 1
    max_replicas: int = 100
    threshold: float = 1.0
    polling_interval: float = 30.0
    scale_up: Rules = SCALE_UP_DEFAULT
    scale_down: Rules = SCALE_DOWN_DEFAULT
    scrape_interval: float = 30.0
    sync: float = SYNC_SECONDS
    tolerance: float = TOLERANCE

    @staticmethod
    def from_scaled_object(document: Mapping[str, Any], scrape_interval: float = 30.0) -> KedaHpaConfig:
        """The model of a ScaledObject manifest: its replica bounds, the threshold of its (first)
        Prometheus trigger, and the behavior it sets, HPA defaults elsewhere."""
        spec = document["spec"]
        trigger = next(t for t in spec["triggers"] if t["type"] == "prometheus")
        behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {})
        return KedaHpaConfig(
            min_replicas=int(spec.get("minReplicaCount", 0)),
            max_replicas=int(spec.get("maxReplicaCount", 100)),
            threshold=float(trigger["metadata"]["threshold"]),
            polling_interval=float(spec.get("pollingInterval", 30)),
            scale_up=_rules(behavior.get("scaleUp"), SCALE_UP_DEFAULT),
            scale_down=_rules(behavior.get("scaleDown"), SCALE_DOWN_DEFAULT),
            scrape_interval=scrape_interval,
        )


def _rules(raw: Mapping[str, Any] | None, default: Rules) -> Rules:
    if not raw:
        return default
    policies = tuple(
        Policy(p["type"], int(p["value"]), float(p["periodSeconds"])) for p in raw.get("policies") or ()
    )
    return Rules(float(raw.get("stabilizationWindowSeconds", default.window)), policies or default.policies)


@dataclass
class KedaHpa:
    """The HPA controller's memory for one target: past proposals and the changes it made."""

    config: KedaHpaConfig
    proposals: list[tuple[float, int]] = field(default_factory=list)
    ups: list[tuple[float, int]] = field(default_factory=list)
    downs: list[tuple[float, int]] = field(default_factory=list)

    def sync(self, now: float, value: float, spec_replicas: int, status_replicas: int) -> int:
        """One sync of the HPA: the replicas it writes to /scale, given the metric's `value` now."""
        config = self.config
        if spec_replicas == 0 and config.min_replicas != 0:
            return spec_replicas  # the HPA leaves a target scaled to zero alone
        if spec_replicas > config.max_replicas:
            desired = config.max_replicas
        elif spec_replicas < config.min_replicas:
            desired = config.min_replicas
        else:
            desired = self._normalized(now, self._proposal(value, status_replicas), spec_replicas)
        if desired != spec_replicas:
            (self.ups if desired > spec_replicas else self.downs).append((now, abs(desired - spec_replicas)))
        return desired

    def _proposal(self, value: float, status_replicas: int) -> int:
        """The metric's proposal: `ceil(value / threshold)` unless within the tolerance."""
        threshold = self.config.threshold
        if status_replicas <= 0:
            return math.ceil(value / threshold)
        ratio = value / (threshold * status_replicas)
        return math.ceil(value / threshold) if abs(1.0 - ratio) > self.config.tolerance else status_replicas

    def _normalized(self, now: float, proposal: int, current: int) -> int:
        """Stabilized over the window of its direction, then held to the rate policies and the bounds."""
        config = self.config
        rising = proposal >= current
        window = config.scale_up.window if rising else config.scale_down.window
        recent = [p for at, p in self.proposals if at > now - window]
        stabilized = min([proposal, *recent]) if rising else max([proposal, *recent])
        keep = max(config.scale_up.window, config.scale_down.window)
        self.proposals = [(at, p) for at, p in self.proposals if at > now - keep] + [(now, proposal)]
        if stabilized > current:
            limit = max(_up_limit(policy, current, self.ups, now) for policy in config.scale_up.policies)
            return min(stabilized, max(limit, current), config.max_replicas)
        if stabilized < current:
            limit = min(
                _down_limit(policy, current, self.downs, now) for policy in config.scale_down.policies
            )
            return max(stabilized, min(limit, current), config.min_replicas)
        return stabilized


def _changed_within(events: list[tuple[float, int]], period: float, now: float) -> int:
    return sum(change for at, change in events if at > now - period)


def _up_limit(policy: Policy, current: int, ups: list[tuple[float, int]], now: float) -> int:
    start = current - _changed_within(ups, policy.period, now)
    if policy.kind == "Pods":
        return start + policy.value
    return math.ceil(start * (1 + policy.value / 100))


def _down_limit(policy: Policy, current: int, downs: list[tuple[float, int]], now: float) -> int:
    start = current + _changed_within(downs, policy.period, now)
    if policy.kind == "Pods":
        return start - policy.value
    return int(start * (1 - policy.value / 100))
