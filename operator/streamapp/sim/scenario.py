"""Scenario files: an app, its workload, its `rebalance` block and a timeline of disruptions.

The keys are a contract shared with docs/simulator.md and `bench/scenarios/`; parsing is strict (unknown keys
and bad values are errors that name the key) because a typo in a benchmark must not silently measure
something else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from streamapp.api.autoscaling import Autoscaling
from streamapp.api.codec import decode
from streamapp.api.fields import ValidationError
from streamapp.api.rebalance import REBALANCE
from streamapp.api.rollingupdate import RollingUpdate
from streamapp.rebalance import ConfigError, Protocol, RebalanceConfig
from streamapp.rebalance.autoscaler import AutoscalerConfig
from streamapp.rebalance.rollout import RolloutConfig
from streamapp.sim.contention import START_KINDS, Contention, FreshMember, StartKind
from streamapp.sim.kedahpa import KedaHpaConfig
from streamapp.sim.scalers import AUTOSCALERS, AutoscalerKind
from streamapp.sim.traces import Cycle, Step, Trace
from streamapp.units import UnitError, parse_duration


class ScenarioError(ValueError):
    """A scenario file is missing a key, has an unknown one, or a value out of range."""


@dataclass(frozen=True)
class Workload:
    """Per-task rates in records/s, state size, and how executors and pods behave.

    `task_start_seconds` is what starting a task as active costs regardless of state (opening its
    source and sink, the first batch); the eager protocol pays it for every task on every rebalance.
    `reassign_seconds` is what a task that moves to another member waits on top of that: its old
    owner's acknowledgement reaching the operator, the new assignment reaching the new owner, and the
    new owner's next round (real executors: 3.6-5.2 s per handed-off task on a loaded machine,
    bench/results/rollout.md); 0 keeps the simulator's instant exchange.

    `detect_seconds` is how long after a pod dies (a `kill`) the operator still sees it ready: a
    kubelet noticing the container gone, the readiness condition changing, the operator's watch and its
    next reconcile (0: at once). A pod the operator deletes itself is known gone at once.

    `local_state` is where a member keeps its tasks' local stores, as the executor does: `claim` (the
    app sets `executor.storage.size`: the member's claim outlives its pods, so a returning member
    replays only what was committed while it was away), `emptyDir` (the default without a claim: it
    survives a container restart but not the pod, and every event here replaces pods, so a returning
    member restores in full) or `none` (nothing local: every start restores in full).

    `new_pod_start_seconds` and `replaced_pod_start_seconds` are how long a new member's first pod (a
    scale-out: a claim never used, a full restore) and a pod the operator replaced (a rollout, a
    timeout: the old pod's termination first) take to become ready, when they differ from
    `pod_start_seconds` (None: they do not). On the cluster benchmark a new member took ~2.5 times
    as long as a restarted container. `contention` is the CPU contention model (None: batches never
    slow down, and the stall is the downtime).

    `member_rate` is how many records a second one member processes at most, shared by its tasks (its
    true rate; None: no limit but each task's `process_rate`): what makes members worth adding.
    `max_restore_records` bounds what a copy without local state restores (the newest snapshot and
    the changelog after it: the store's compaction keeps it so); None: the whole changelog, which grows
    with every record processed.
    """

    input_rate: float = 100.0
    process_rate: float = 400.0
    restore_rate: float = 2000.0
    state_records: int = 200_000
    report_interval: float = 2.0
    pod_start_seconds: float = 20.0
    task_start_seconds: float = 0.0
    reassign_seconds: float = 0.0
    detect_seconds: float = 0.0
    local_state: LocalState = "claim"
    new_pod_start_seconds: float | None = None
    replaced_pod_start_seconds: float | None = None
    contention: Contention | None = None
    member_rate: float | None = None
    max_restore_records: float | None = None

    def pod_start(self, kind: StartKind) -> float:
        """How long a pod that starts this way takes to become ready (a `restarted` one is given by
        its event's `restartAfter`)."""
        chosen = {"new": self.new_pod_start_seconds, "replaced": self.replaced_pod_start_seconds}.get(kind)
        return self.pod_start_seconds if chosen is None else chosen


@dataclass(frozen=True)
class SimEvent:
    """One disruption at time `at`: exactly one of scale, kill, deafen, stall or rolling restart.

    `deafen` names a member whose executor stops applying targets and acknowledging (a dead watch, a
    batch stuck in user code) while its pod stays ready and it keeps processing what it had; only the
    revocation deadline gets it replaced. `stall` names one whose batch round never ends (a Spark that
    hangs): it processes nothing and acknowledges nothing while its pod stays ready, until
    `batchTimeout` gets it replaced (`rebalance.stuck`).
    """

    at: float
    scale: int | None = None
    kill: int | None = None
    restart_after: float | None = None
    rolling_restart: bool = False
    deafen: int | None = None
    stall: int | None = None


@dataclass(frozen=True)
class Scenario:
    """Everything one simulation run needs, for any protocol."""

    name: str
    partitions: int
    members: int
    duration: float
    workload: Workload
    rebalance: RebalanceConfig
    events: tuple[SimEvent, ...]
    zones: tuple[str, ...] = ()
    tick: float = 1.0
    rolling_update: RolloutConfig = field(default_factory=RolloutConfig)
    trace: Trace | None = None
    autoscaling: AutoscalerConfig = field(default_factory=AutoscalerConfig)
    keda: KedaHpaConfig | None = None
    autoscaler: AutoscalerKind = "none"

    def with_protocol(self, protocol: Protocol) -> Scenario:
        """The same scenario under another protocol (everything else equal)."""
        return replace(self, rebalance=replace(self.rebalance, protocol=protocol))

    def with_autoscaler(self, autoscaler: AutoscalerKind) -> Scenario:
        """The same scenario with another autoscaler setting its replicas."""
        if autoscaler == "keda-hpa" and self.keda is None:
            raise ScenarioError(f"{self.name}: autoscaler keda-hpa needs a keda block")
        return replace(self, autoscaler=autoscaler)

    def with_seed(self, seed: int) -> Scenario:
        """The same scenario with its trace's noise drawn from `seed`."""
        return replace(self, trace=replace(self.trace, seed=seed) if self.trace else None)


_TOP_KEYS = {
    "name",
    "partitions",
    "members",
    "duration",
    "zones",
    "workload",
    "rebalance",
    "rollingUpdate",
    "events",
    "tick",
    "trace",
    "autoscaling",
    "keda",
    "autoscaler",
}
_WORKLOAD_KEYS = {
    "inputRate": "input_rate",
    "processRate": "process_rate",
    "restoreRate": "restore_rate",
    "stateRecords": "state_records",
    "reportInterval": "report_interval",
    "podStartSeconds": "pod_start_seconds",
    "taskStartSeconds": "task_start_seconds",
    "reassignSeconds": "reassign_seconds",
    "detectSeconds": "detect_seconds",
    "newPodStartSeconds": "new_pod_start_seconds",
    "replacedPodStartSeconds": "replaced_pod_start_seconds",
    "memberRate": "member_rate",
    "maxRestoreRecords": "max_restore_records",
}
_CONTENTION_KEYS = {
    "cores": "cores",
    "apps": "apps",
    "cadence": "cadence",
    "stretchPerLoad": "stretch_per_load",
    "idleLoad": "idle_load",
    "startingLoad": "starting_load",
    "freshLoad": "fresh_load",
    "restoreLoad": "restore_load",
    "freshStretch": "fresh_stretch",
    "freshDecaySeconds": "fresh_decay_seconds",
    "fresh": "fresh",
}
_FRESH_KEYS = {"member", "readyBefore", "start"}
LocalState = Literal["claim", "emptyDir", "none"]
_EVENT_KEYS = {"at", "scale", "kill", "restartAfter", "rollingRestart", "deafen", "stall"}


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; errors name the file and the key."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ScenarioError(f"{path}: cannot read: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise ScenarioError(f"{path}: not valid YAML: {error}") from error
    try:
        return parse_scenario(data, path.parent)
    except (ScenarioError, ConfigError, UnitError) as error:
        raise ScenarioError(f"{path}: {error}") from error


def parse_scenario(data: object, base: Path | None = None) -> Scenario:
    """Validate an already-parsed scenario document; relative paths in it are taken from `base`."""
    doc = _mapping(data, "scenario")
    _no_unknown(doc, _TOP_KEYS, "scenario")
    for key in ("name", "partitions", "members", "duration"):
        if key not in doc:
            raise ScenarioError(f"missing required key {key!r}")
    partitions = _int(doc["partitions"], "partitions", minimum=1)
    members = _int(doc["members"], "members", minimum=0)
    duration = parse_duration(doc["duration"], "duration")
    zones = tuple(str(z) for z in doc.get("zones") or ())
    events = tuple(sorted((_event(e, i) for i, e in enumerate(doc.get("events") or [])), key=lambda e: e.at))
    workload = _workload(doc.get("workload") or {})
    fresh = [f.member for f in workload.contention.fresh] if workload.contention else []
    if any(m >= members for m in fresh) or len(set(fresh)) != len(fresh):
        raise ScenarioError(
            f"workload.contention.fresh: each member once, below members ({members}); got {fresh}"
        )
    return Scenario(
        name=str(doc["name"]),
        partitions=partitions,
        members=members,
        duration=duration,
        workload=workload,
        rebalance=_rebalance(doc.get("rebalance") or {}),
        events=events,
        zones=zones,
        tick=_positive(doc.get("tick", 1.0), "tick"),
        rolling_update=_rolling_update(doc.get("rollingUpdate") or {}),
        trace=_trace(doc["trace"]) if "trace" in doc else None,
        autoscaling=_autoscaling(doc.get("autoscaling") or {}),
        keda=_keda(doc["keda"], base or Path.cwd()) if "keda" in doc else None,
        autoscaler=_autoscaler(doc.get("autoscaler", "none"), "keda" in doc),
    )


def _rebalance(raw: object) -> RebalanceConfig:
    """The block a StreamApp's `spec.rebalance` holds, checked by the same rules the API server runs."""
    try:
        config: RebalanceConfig = REBALANCE.decode(raw, "rebalance")
    except ValidationError as error:
        raise ScenarioError(str(error)) from None
    return config


def _rolling_update(raw: object) -> RolloutConfig:
    """The block a StreamApp's `spec.rollingUpdate` holds, checked by the same rules."""
    try:
        return decode(RollingUpdate, raw, "rollingUpdate").config()
    except ValidationError as error:
        raise ScenarioError(str(error)) from None


def _autoscaling(raw: object) -> AutoscalerConfig:
    """The block a StreamApp's `spec.autoscaling` holds, checked by the same rules."""
    try:
        return decode(Autoscaling, raw, "autoscaling").config()
    except ValidationError as error:
        raise ScenarioError(str(error)) from None


def _autoscaler(raw: object, keda: bool) -> AutoscalerKind:
    for kind in AUTOSCALERS:
        if raw == kind:
            if kind == "keda-hpa" and not keda:
                raise ScenarioError("autoscaler keda-hpa needs a keda block")
            return kind
    raise ScenarioError(f"autoscaler must be one of {', '.join(AUTOSCALERS)}, got {raw!r}")


def _keda(raw: object, base: Path) -> KedaHpaConfig:
    """`keda: {scaledObject: FILE, scrapeInterval: S}`: the ScaledObject a user applies (a path from the
    scenario file), and how often Prometheus scrapes the operator (default 30 s, the chart's)."""
    spec = _mapping(raw, "keda")
    _no_unknown(spec, {"scaledObject", "scrapeInterval"}, "keda")
    if "scaledObject" not in spec:
        raise ScenarioError("keda: missing 'scaledObject'")
    path = base / str(spec["scaledObject"])
    try:
        document = yaml.safe_load(path.read_text())
        return KedaHpaConfig.from_scaled_object(
            document, _positive(spec.get("scrapeInterval", 30.0), "keda.scrapeInterval")
        )
    except OSError as error:
        raise ScenarioError(f"keda.scaledObject: cannot read {path}: {error.strerror}") from error
    except (yaml.YAMLError, KeyError, TypeError, ValueError, StopIteration) as error:
        raise ScenarioError(
            f"keda.scaledObject: {path} is no ScaledObject with a prometheus trigger: {error!r}"
        ) from error


def _trace(raw: object) -> Trace:
    """`trace: {steps: [{at, rate}...] | cycle: {low, high, period}, noise, noiseSeconds, seed}`."""
    spec = _mapping(raw, "trace")
    _no_unknown(spec, {"steps", "cycle", "noise", "noiseSeconds", "seed"}, "trace")
    if ("steps" in spec) == ("cycle" in spec):
        raise ScenarioError("trace: needs exactly one of steps, cycle")
    steps: tuple[Step, ...] = ()
    cycle = None
    if "steps" in spec:
        if not isinstance(spec["steps"], list) or not spec["steps"]:
            raise ScenarioError("trace.steps: expected a non-empty list")
        for index, item in enumerate(spec["steps"]):
            step = _mapping(item, f"trace.steps[{index}]")
            _no_unknown(step, {"at", "rate"}, f"trace.steps[{index}]")
            steps += (
                Step(
                    parse_duration(step.get("at"), f"trace.steps[{index}].at"),
                    _positive(step.get("rate"), f"trace.steps[{index}].rate", allow_zero=True),
                ),
            )
        steps = tuple(sorted(steps, key=lambda s: s.at))
    else:
        shape = _mapping(spec["cycle"], "trace.cycle")
        _no_unknown(shape, {"low", "high", "period"}, "trace.cycle")
        cycle = Cycle(
            _positive(shape.get("low"), "trace.cycle.low", allow_zero=True),
            _positive(shape.get("high"), "trace.cycle.high", allow_zero=True),
            parse_duration(shape.get("period"), "trace.cycle.period"),
        )
    return Trace(
        steps=steps,
        cycle=cycle,
        noise=_positive(spec.get("noise", 0.0), "trace.noise", allow_zero=True),
        noise_seconds=_positive(spec.get("noiseSeconds", 30.0), "trace.noiseSeconds"),
        seed=_int(spec.get("seed", 0), "trace.seed", minimum=0),
    )


def _workload(raw: object) -> Workload:
    spec = _mapping(raw, "workload")
    _no_unknown(spec, {*_WORKLOAD_KEYS, "localState", "contention"}, "workload")
    values: dict[str, Any] = {}
    if "localState" in spec:
        if spec["localState"] not in get_args(LocalState):
            raise ScenarioError(f"workload.localState must be one of {', '.join(get_args(LocalState))}")
        values["local_state"] = spec["localState"]
    if "contention" in spec:
        values["contention"] = _contention(spec["contention"])
    for key, name in _WORKLOAD_KEYS.items():
        if key in spec:
            zero = key in ("taskStartSeconds", "reassignSeconds", "detectSeconds")
            values[name] = _positive(spec[key], f"workload.{key}", allow_zero=zero)
    if "state_records" in values:
        values["state_records"] = int(values["state_records"])
    return Workload(**values)


def _contention(raw: object) -> Contention:
    """`workload.contention`: `cores` is required, everything else has a default that slows nothing."""
    where = "workload.contention"
    spec = _mapping(raw, where)
    _no_unknown(spec, set(_CONTENTION_KEYS), where)
    if "cores" not in spec:
        raise ScenarioError(f"{where}: missing 'cores'")
    values: dict[str, Any] = {}
    for key, name in _CONTENTION_KEYS.items():
        if key not in spec:
            continue
        value, at = spec[key], f"{where}.{key}"
        if key == "apps":
            values[name] = _int(value, at, minimum=1)
        elif key in ("freshStretch", "startingLoad"):
            kinds = _mapping(value, at)
            _no_unknown(kinds, set(START_KINDS), at)
            values[name] = {kind: _positive(v, f"{at}.{kind}", allow_zero=True) for kind, v in kinds.items()}
        elif key == "fresh":
            values[name] = tuple(_fresh(item, f"{at}[{i}]") for i, item in enumerate(_list(value, at)))
        else:
            zero = key in ("stretchPerLoad", "idleLoad", "freshLoad", "restoreLoad")
            values[name] = _positive(value, at, allow_zero=zero)
    return Contention(**values)


def _fresh(raw: object, where: str) -> FreshMember:
    spec = _mapping(raw, where)
    _no_unknown(spec, _FRESH_KEYS, where)
    missing = sorted(_FRESH_KEYS - set(spec))
    if missing:
        raise ScenarioError(f"{where}: missing {', '.join(missing)}")
    if spec["start"] not in START_KINDS:
        raise ScenarioError(f"{where}.start must be one of {', '.join(START_KINDS)}")
    return FreshMember(
        member=_int(spec["member"], f"{where}.member", minimum=0),
        ready_before=_positive(spec["readyBefore"], f"{where}.readyBefore", allow_zero=True),
        start=spec["start"],
    )


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ScenarioError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _event(raw: object, index: int) -> SimEvent:
    where = f"events[{index}]"
    spec = _mapping(raw, where)
    _no_unknown(spec, _EVENT_KEYS, where)
    if "at" not in spec:
        raise ScenarioError(f"{where}: missing 'at'")
    actions = [k for k in ("scale", "kill", "deafen", "stall", "rollingRestart") if k in spec]
    if len(actions) != 1:
        raise ScenarioError(
            f"{where}: needs exactly one of scale, kill, deafen, stall, rollingRestart; got {actions or 'none'}"
        )
    if "restartAfter" in spec and "kill" not in spec:
        raise ScenarioError(f"{where}: restartAfter goes with kill")
    return SimEvent(
        at=parse_duration(spec["at"], f"{where}.at"),
        scale=_int(spec["scale"], f"{where}.scale", minimum=0) if "scale" in spec else None,
        kill=_int(spec["kill"], f"{where}.kill", minimum=0) if "kill" in spec else None,
        restart_after=parse_duration(spec["restartAfter"], f"{where}.restartAfter")
        if "restartAfter" in spec
        else None,
        rolling_restart=bool(spec.get("rollingRestart", False)),
        deafen=_int(spec["deafen"], f"{where}.deafen", minimum=0) if "deafen" in spec else None,
        stall=_int(spec["stall"], f"{where}.stall", minimum=0) if "stall" in spec else None,
    )


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _no_unknown(spec: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(spec) - known)
    if unknown:
        raise ScenarioError(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )


def _int(value: object, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ScenarioError(f"{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def _positive(value: object, key: str, allow_zero: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        raise ScenarioError(f"{key}: expected a number {'>=' if allow_zero else '>'} 0, got {value!r}")
    return float(value)
