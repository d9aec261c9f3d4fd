"""The StreamApp resource: the user's app (DESIGN.md §4).

`spec` is what the user wants — how many executors, how many tasks, the PySpark pipeline, the executor
pod and how tasks move; `status` is what the operator observed and decided, including the engine's
persisted assignment (`intent`) so that a restarted operator resumes an in-flight handoff.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from streamapp.api.conditions import Condition, ConditionType
from streamapp.api.fields import Rule, prop
from streamapp.api.meta import Resource
from streamapp.api.model import Model
from streamapp.api.rebalance import REBALANCE
from streamapp.rebalance.config import AppConfig, RebalanceConfig

FUNCTION_PATTERN = "[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*"
BUILTIN_MERGES = ("sum", "count", "min", "max", "last")
MAX_NAME_LENGTH = 256
MAX_CONDITIONS = 8

EndpointType = Literal["file", "kafka"]
MemberPhase = Literal["Starting", "Ready", "Lost", "Draining"]


@dataclass(frozen=True, kw_only=True)
class Endpoint(Model):
    """Where records come from or go to: a file-based partitioned log (no external service) or Kafka.

    Open: adapter-specific options (topic, consumer settings, ...) are kept as they are for the executor.
    """

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "self.type != 'file' || has(self.path)",
            "a file endpoint needs path",
            lambda e: e.type != "file" or e.path is not None,
            ".path",
        ),
        Rule(
            "self.type != 'kafka' || has(self.uri)",
            "a kafka endpoint needs uri",
            lambda e: e.type != "kafka" or e.uri is not None,
            ".uri",
        ),
    )

    type: EndpointType = field(metadata=prop("file (a partitioned log in a directory) or kafka."))
    path: str | None = field(
        default=None, metadata=prop("Directory of a file log (partitions under p=<P>/).")
    )
    uri: str | None = field(
        default=None, metadata=prop("Address of the endpoint, e.g. kafka://broker:9092/topic.")
    )
    options: dict[str, Any] = field(
        default_factory=dict, metadata=prop("Adapter-specific options.", rest=True)
    )


@dataclass(frozen=True, kw_only=True)
class StateStore(Model):
    """Durable storage shared by all executors: commit manifests, changelog segments and snapshots.

    Every copy of a task rebuilds its state from here, so it must outlive any pod.
    """

    uri: str = field(
        metadata=prop("Location of the store, e.g. file:///data/app or a mounted path.", max_length=2048)
    )
    options: dict[str, Any] = field(default_factory=dict, metadata=prop("Store-specific options.", rest=True))


@dataclass(frozen=True, kw_only=True)
class Pipeline(Model):
    """The PySpark entry point: a transform from a batch of one partition's records to keyed updates, the
    merge that folds them into state, and where input, output and state live.

    Open: options the executor adds later are kept as they are.
    """

    PATH: ClassVar[str] = "spec.pipeline"

    transform: str = field(
        metadata=prop(
            "The transform as module:function, e.g. streamapp.executor.samples.counts:counts.",
            pattern=f"^{FUNCTION_PATTERN}$",
            pattern_message="transform must be module:function",
            max_length=MAX_NAME_LENGTH,
        )
    )
    source: Endpoint = field(metadata=prop("The partitioned input log."))
    sink: Endpoint | None = field(
        default=None, metadata=prop("Where outputs go; by default next to the state.")
    )
    state_store: StateStore = field(metadata=prop("Durable storage of committed state and changelogs."))
    merge: str | None = field(
        default=None,
        metadata=prop(
            "How updates fold into state: sum, count, min, max, last or module:function; overrides the "
            "merge the transform declares.",
            pattern=f"^({'|'.join(BUILTIN_MERGES)}|{FUNCTION_PATTERN})$",
            pattern_message=f"merge must be one of {', '.join(BUILTIN_MERGES)} or module:function",
            max_length=MAX_NAME_LENGTH,
        ),
    )
    options: dict[str, Any] = field(
        default_factory=dict, metadata=prop("Executor options not modelled here.", rest=True)
    )


@dataclass(frozen=True, kw_only=True)
class Storage(Model):
    """The member's own volume, so a restarted member finds its local state and restores nothing."""

    size: str | None = field(
        default=None,
        metadata=prop(
            "Size of each member's volume claim <app>-state-<id>, e.g. 10Gi; without it members keep local "
            "state in an emptyDir and a restarted pod restores from the state store.",
            max_length=64,
        ),
    )
    storage_class_name: str | None = field(
        default=None, metadata=prop("StorageClass of the claims; the cluster default if unset.")
    )
    retain_on_scale_in: bool = field(
        default=False,
        metadata=prop("Keep a removed member's claim after scale-in (a later scale-out reuses it)."),
    )


@dataclass(frozen=True, kw_only=True)
class Executor(Model):
    """The executor pods: image, command, resources and Spark settings of every member."""

    PATH: ClassVar[str] = "spec.executor"

    image: str = field(
        metadata=prop("Container image with the streamapp distribution and the user's pipeline module.")
    )
    command: tuple[str, ...] = field(
        default=("streamapp", "executor", "--from-cluster"),
        metadata=prop(
            "Container command; --from-cluster makes the executor follow its StreamAppMember, named by "
            "the pod's environment."
        ),
    )
    resources: dict[str, Any] | None = field(
        default=None, metadata=prop("Container resources (requests/limits).")
    )
    spark_conf: dict[str, str] | None = field(
        default=None, metadata=prop("Spark settings, e.g. spark.master or spark.sql.shuffle.partitions.")
    )
    pod_template: dict[str, Any] | None = field(
        default=None,
        metadata=prop(
            "Pod template merged under the operator's pod (labels, tolerations, affinity, sidecars)."
        ),
    )
    storage: Storage = field(default_factory=Storage, metadata=prop("Per-member state volumes."))


@dataclass(frozen=True, kw_only=True)
class StreamAppSpec(Model):
    """What the user wants: executors, tasks, the pipeline, the executor pods and how tasks move."""

    PATH: ClassVar[str] = "spec"
    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "!has(self.rebalance) || !has(self.rebalance.standbyReplicas) || self.replicas == 0"
            " || self.rebalance.standbyReplicas < self.replicas",
            "rebalance.standbyReplicas must be less than replicas",
            lambda s: s.replicas == 0 or s.rebalance.standby_replicas < s.replicas,
            ".rebalance.standbyReplicas",
        ),
    )

    replicas: int = field(
        default=3,
        metadata=prop("Executors (members 0..replicas-1); the /scale subresource sets it.", minimum=0),
    )
    partitions: int = field(
        metadata=prop(
            "Tasks (0..partitions-1), the unit of state and of assignment; immutable, because keyed state is "
            "partitioned by it.",
            minimum=1,
            rules=(Rule("self == oldSelf", "partitions is immutable"),),
        )
    )
    pipeline: Pipeline = field(metadata=prop("The PySpark pipeline every member runs."))
    executor: Executor = field(metadata=prop("The executor pods."))
    rebalance: RebalanceConfig = field(
        default_factory=RebalanceConfig,
        metadata=prop(
            "How tasks move between members; the same block as a simulator scenario's.", codec=REBALANCE
        ),
    )

    def app_config(self) -> AppConfig:
        """The engine's view of the app."""
        return AppConfig(partitions=self.partitions, replicas=self.replicas, rebalance=self.rebalance)


@dataclass(frozen=True, kw_only=True)
class TaskCounts(Model):
    """How many tasks are in each state, for printer columns and alerts."""

    active: int = field(default=0, metadata=prop("Tasks processed by a live member."))
    warming: int = field(default=0, metadata=prop("Warmup copies catching up to take a task over."))
    reserved: int = field(default=0, metadata=prop("Tasks held for lost members until the delay expires."))
    unassigned: int = field(
        default=0, metadata=prop("Tasks nobody processes or holds (only when no member is live).")
    )
    revoking: int = field(default=0, metadata=prop("Tasks whose owner is letting go during a handoff."))


@dataclass(frozen=True, kw_only=True)
class MemberSummary(Model):
    """One member as the operator sees it; its StreamAppMember lists the tasks themselves."""

    id: int = field(metadata=prop("Static member id; the pod is <app>-<id>."))
    pod: str | None = field(default=None, metadata=prop("Name of the member's pod, when it exists."))
    phase: MemberPhase = field(
        metadata=prop("Starting, Ready, Lost (pod gone or not ready) or Draining (scale-in).")
    )
    active: int = field(default=0, metadata=prop("How many tasks the member processes."))
    standby: int = field(default=0, metadata=prop("How many tasks the member keeps hot copies of."))
    warmup: int = field(default=0, metadata=prop("How many tasks the member is warming up."))
    lag: int = field(default=0, metadata=prop("Records the member's copies still have to apply, summed."))


@dataclass(frozen=True, kw_only=True)
class LastRebalance(Model):
    """The most recent assignment change."""

    time: str = field(metadata=prop("When the generation was written.", format="date-time"))
    reason: str = field(metadata=prop("What triggered it, e.g. ScaleOut, MemberLost, WarmupCaughtUp."))
    moved: int = field(default=0, metadata=prop("Tasks whose active owner changed."))


@dataclass(frozen=True, kw_only=True)
class StreamAppStatus(Model):
    """What the operator observed and decided."""

    PATH: ClassVar[str] = "status"

    observed_generation: int | None = field(
        default=None, metadata=prop("metadata.generation of the spec last reconciled.")
    )
    conditions: tuple[Condition, ...] = field(
        default=(),
        metadata=prop("Ready, Rebalancing and Degraded.", list_map_keys=("type",), max_items=MAX_CONDITIONS),
    )
    generation: int | None = field(
        default=None, metadata=prop("Assignment generation, bumped on every assignment change.")
    )
    replicas: int | None = field(default=None, metadata=prop("Members that exist (for /scale)."))
    ready_replicas: int | None = field(default=None, metadata=prop("Members whose pod is Ready."))
    selector: str | None = field(
        default=None, metadata=prop("Label selector of the member pods (for /scale, HPA and KEDA).")
    )
    tasks: TaskCounts | None = field(default=None, metadata=prop("Tasks per state."))
    input_lag: int | None = field(
        default=None,
        metadata=prop(
            "Records in the source not yet processed, summed over the tasks whose active owner's current "
            "pod reported it (the metric to autoscale on); unset until one has."
        ),
    )
    members: tuple[MemberSummary, ...] = field(
        default=(), metadata=prop("Per-member summary.", list_map_keys=("id",))
    )
    last_rebalance: LastRebalance | None = field(
        default=None, metadata=prop("The most recent assignment change.")
    )
    intent: dict[str, Any] | None = field(
        default=None,
        metadata=prop(
            "The engine's persisted assignment (revocations awaiting acks, reservations, epochs), written "
            "before acting so a restarted operator resumes."
        ),
    )

    def condition(self, type_: ConditionType) -> Condition | None:
        """The condition of that type, if set."""
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(frozen=True, kw_only=True)
class StreamApp(Resource[StreamAppSpec, StreamAppStatus]):
    """A stateful stream-processing app whose executors run PySpark."""

    KIND: ClassVar[str] = "StreamApp"
    PLURAL: ClassVar[str] = "streamapps"
    SINGULAR: ClassVar[str] = "streamapp"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("sapp",)

    SPEC: ClassVar[type[Model]] = StreamAppSpec
    STATUS: ClassVar[type[Model]] = StreamAppStatus

    status: StreamAppStatus = field(default_factory=StreamAppStatus)
