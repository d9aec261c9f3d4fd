"""The StreamApp resource: the user's app (docs/api.md).

`spec` is what the user wants — how many executors, how many tasks, the PySpark pipeline, the executor
pod and how tasks move; `status` is what the operator observed and decided, including the engine's
persisted assignment (`intent`) so that a restarted operator resumes an in-flight handoff.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

from streamapp.api.autoscaling import Autoscaling
from streamapp.api.conditions import Condition, ConditionType
from streamapp.api.fields import Rule, ValidationError, model_rules, prop
from streamapp.api.kafka import KafkaTopic
from streamapp.api.meta import Resource
from streamapp.api.podtemplate import POD_TEMPLATE
from streamapp.api.rebalance import DURATION_MAX_LENGTH, DURATION_PATTERN, REBALANCE, at_most
from streamapp.api.rollingupdate import RollingUpdate
from streamapp.api.sparkconf import (
    KUBERNETES_CEL,
    KUBERNETES_MESSAGE,
    KUBERNETES_MESSAGE_CEL,
    SPARK_CONF_MAX_KEYS,
    WIRED_CEL,
    WIRED_MESSAGE,
    WIRED_MESSAGE_CEL,
    kubernetes_message,
    refused_kubernetes_keys,
    refused_wired_keys,
    wired_message,
)
from streamapp.api.wiremodel import Model
from streamapp.rebalance.config import AppConfig, RebalanceConfig
from streamapp.units import byte_count, cpu_cores

FUNCTION_PATTERN = "[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*"
BUILTIN_MERGES = ("sum", "count", "min", "max", "last")
MAX_NAME_LENGTH = 256
MAX_PATH_LENGTH = 4096
MAX_CONDITIONS = 8

# The supported maxima, from bench/results/scale.md (make bench-scale). The persisted assignment
# (status.intent, controller/intent.py) takes ~0.1 byte per task for a planned app and at most ~3
# bytes per task copy when owners, standbys and epochs are scattered at random; the member rows take
# ~90 bytes per member. At 100,000 tasks, one standby each and 1,000 members the worst case stays
# near 0.7 MB, under 1 MiB and well inside etcd's 1.5 MiB request limit
# (tests/controller/test_admission.py builds it).
MAX_PARTITIONS = 100_000
MAX_TASK_COPIES = 200_000
MAX_REPLICAS = 1_000
# Children are named <app>-<id> (pod, its hostname, StreamAppMember, the member's ServiceAccount and
# Role) and <app>-state-<id> (claim): all must be DNS labels of at most 63 characters for every id below
# MAX_REPLICAS, and the app's name is its Service's name and a label value.
DNS_LABEL_MAX = 63
MAX_APP_NAME_LENGTH = DNS_LABEL_MAX - len("-state-") - len(str(MAX_REPLICAS - 1))
DNS_1035_LABEL = "^[a-z]([-a-z0-9]*[a-z0-9])?$"
# Spark names a member's executor pods `<member pod>-exec-<n>` (executor/sparkk8s.py), so app `x`'s
# member 0 would make a pod `x-0-exec-3` that is also member 3 of an app named `x-0-exec`.
SPARK_EXECUTOR_POD_NAMES = "-[0-9]+-exec$"
QUANTITY_PATTERN = "^[0-9]+([.][0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
STATE_STORE_PATTERN = "^(file:///[^/]|s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$)"
S3_ENDPOINT_PATTERN = "^https?://[^/]+/?$"
DNS_1123_SUBDOMAIN = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
# Keys the executor reads from `stateStore.credentialsSecret` (the standard AWS variable names). Static
# keys only: short-lived credentials come from the pods' identity (no Secret) instead.
S3_SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
IMAGE_PATTERN = "^[!-~]+$"
CPU_PATTERN = "^([0-9]+|[0-9]*[.][0-9]+)m?$"
SPARK_MEMORY_PATTERN = "^[1-9][0-9]*[kmgt]?$"
# How long, and up to how many bytes per task, the changelog after a member's local checkpoint is kept
# (executor.state.retention). An hour covers a node drain or upgrade; Kafka Streams keeps a task's
# local state 10 min after it left by default (state.cleanup.delay.ms), too short for those.
DEFAULT_DELTA_RETENTION = "1h"
DEFAULT_DELTA_RETENTION_SECONDS = 3600.0
DEFAULT_DELTA_RETENTION_SIZE = "1Gi"
DEFAULT_DELTA_RETENTION_BYTES = 1 << 30

# Endpoint kinds the executor implements. Checked by a CEL rule rather than an OpenAPI enum: the API
# server skips CEL rules once an enum fails.
ENDPOINT_TYPES = ("file", "kafka")
MemberPhase = Literal["Starting", "Ready", "Restarting", "Lost", "Draining"]
# How each task keeps its state on the member's volume (the executor's `localstate`).
LocalStoreKind = Literal["memory", "lmdb"]
DEFAULT_LOCAL_STORE: LocalStoreKind = "lmdb"
"""The store that scales: a partition's state may outgrow the member's memory (docs/operations.md,
"Sizing a member's memory"); `memory` is faster per batch while it fits."""
AccountScope = Literal["member", "app"]


@dataclass(frozen=True, kw_only=True)
class Endpoint(Model):
    """Where records come from or go to: a file-based partitioned log in a directory (no external
    service), or a Kafka topic (`kafka`)."""

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "self.type != 'file' || has(self.path)",
            "a file endpoint needs path",
            lambda e: e.type != "file" or e.path is not None,
            ".path",
        ),
        Rule(
            "self.type != 'kafka' || has(self.kafka)",
            "a kafka endpoint needs kafka (bootstrapServers and topic)",
            lambda e: e.type != "kafka" or e.kafka is not None,
            ".kafka",
        ),
    )

    type: str = field(
        metadata=prop(
            "file (a partitioned log in a directory) or kafka (a topic).",
            max_length=64,
            rules=(
                Rule(
                    f"self in {list(ENDPOINT_TYPES)}",
                    f"type must be one of {', '.join(ENDPOINT_TYPES)}",
                    lambda t: t in ENDPOINT_TYPES,
                ),
            ),
        )
    )
    path: str | None = field(
        default=None,
        metadata=prop(
            "Absolute directory of a file log (partitions under p=<P>/), as mounted in the executor pods.",
            max_length=MAX_PATH_LENGTH,
            rules=(
                Rule(
                    "self.startsWith('/')",
                    "path must be absolute (start with /)",
                    lambda p: p.startswith("/"),
                ),
            ),
        ),
    )
    kafka: KafkaTopic | None = field(default=None, metadata=prop("The topic of a kafka endpoint."))
    options: dict[str, Any] | None = field(
        default=None, metadata=prop("Adapter-specific options, passed to the executor as they are.")
    )


@dataclass(frozen=True, kw_only=True)
class StateStore(Model):
    """Durable storage shared by all executors: commit manifests, changelog segments and snapshots.

    Every copy of a task rebuilds its state from here, so it must outlive any pod. Credentials are never
    inline: an S3 store reads them from a Secret the pods get as env, or from the pods' identity.
    """

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "self.uri.startsWith('s3://') || (!has(self.endpoint) && !has(self.region) && "
            "!has(self.credentialsSecret))",
            "endpoint, region and credentialsSecret apply to s3:// stores only",
            lambda store: (
                store.uri.startswith("s3://")
                or (store.endpoint is None and store.region is None and store.credentials_secret is None)
            ),
        ),
    )

    uri: str = field(
        metadata=prop(
            "Location of the store: file:///<absolute path> (a volume every member mounts, e.g. "
            "file:///data/state) or s3://<bucket>/<prefix> (an S3-API object store). One app's: the "
            "first executor to start claims the root for its app (owner.json), and executors of any "
            "other app refuse it (the app's Degraded condition says which app owns it).",
            max_length=2048,
            pattern=STATE_STORE_PATTERN,
            pattern_message="stateStore.uri must be file:///<absolute path> or s3://<bucket>/<prefix>",
        )
    )
    endpoint: str | None = field(
        default=None,
        metadata=prop(
            "S3 API endpoint of a non-AWS server, e.g. http://minio.storage:9000; omit for AWS S3.",
            max_length=2048,
            pattern=S3_ENDPOINT_PATTERN,
            pattern_message="stateStore.endpoint must be http(s)://host[:port]",
        ),
    )
    region: str | None = field(
        default=None,
        metadata=prop("Region of the bucket (AWS_REGION of the pods), e.g. eu-west-1.", max_length=64),
    )
    credentials_secret: str | None = field(
        default=None,
        metadata=prop(
            f"Name of a Secret in the app's namespace holding {' and '.join(S3_SECRET_KEYS)}, given to "
            "the executor pods as env. Without it the pods use the default AWS credential chain (IRSA / "
            "pod identity / instance profile).",
            max_length=253,
            pattern=DNS_1123_SUBDOMAIN,
            pattern_message="stateStore.credentialsSecret must be a Secret name",
        ),
    )
    delta_retention: str = field(
        default=DEFAULT_DELTA_RETENTION,
        metadata=prop(
            "How long the changelog after a member's local checkpoint of a task is kept: a member that "
            "gets the task back within it (a restarted pod, a rolling restart, a drained node) replays "
            "only what changed since its checkpoint; later it restores in full. Members keep their local "
            "state of a task this long after it left them.",
            pattern=DURATION_PATTERN,
            pattern_message="deltaRetention must be a duration such as 30m or 1h",
            max_length=DURATION_MAX_LENGTH,
            rules=(at_most("deltaRetention"),),
        ),
    )
    delta_retention_size: str = field(
        default=DEFAULT_DELTA_RETENTION_SIZE,
        metadata=prop(
            "At most this many bytes of changelog per task are kept for members' checkpoints beyond "
            "what the snapshots need; over it, the oldest checkpoint loses its delta first.",
            max_length=64,
            pattern=QUANTITY_PATTERN,
            pattern_message="deltaRetentionSize must be a quantity such as 512Mi or 1Gi",
            rules=(
                Rule(
                    "self.matches('[1-9]')",
                    "deltaRetentionSize must be more than zero",
                    lambda size: byte_count(size) is not None,
                ),
            ),
        ),
    )
    options: dict[str, Any] | None = field(
        default=None, metadata=prop("Store-specific options, passed to the executor as they are.")
    )


@dataclass(frozen=True, kw_only=True)
class Pipeline(Model):
    """The PySpark entry point: a transform from a batch of one partition's records to keyed updates, the
    merge that folds them into state, and where input, output and state live.

    Closed: a mistyped key is refused (kubectl's strict field validation; the operator refuses what gets
    past it) instead of being silently ignored; executor options go under `options`.
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
    allowed_lateness: str | None = field(
        default=None,
        metadata=prop(
            "For windowed pipelines (a transform that declares window_end): how long after the newest "
            "window of a partition an older window still takes records; then its state row is deleted "
            "and later records for it are dropped. Overrides the transform's declared lateness.",
            pattern=DURATION_PATTERN,
            pattern_message="allowedLateness must be a duration such as 30s, 5m or 1h30m",
            max_length=DURATION_MAX_LENGTH,
        ),
    )
    local_store: LocalStoreKind = field(
        default=DEFAULT_LOCAL_STORE,
        metadata=prop(
            "How each task keeps its state on the member's volume: lmdb (LMDB on the volume, for state "
            "larger than memory: only its hot pages need the pod's memory) or memory (a dict "
            "checkpointed to a file; faster per batch, but a partition's whole state must fit in the "
            "executor's memory). Either way a restarted member with its volume replays only what was "
            "committed since its checkpoint."
        ),
    )
    options: dict[str, Any] | None = field(
        default=None, metadata=prop("Executor options not modelled here, passed on as they are.")
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
            pattern=QUANTITY_PATTERN,
            pattern_message="storage.size must be a quantity such as 512Mi, 10Gi or 1T",
            rules=(
                Rule(
                    "self.matches('[1-9]')",
                    "storage.size must be more than zero",
                    lambda size: any(c in "123456789" for c in size),
                ),
            ),
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
class MemberCapacity(Model):
    """One member's capacity set explicitly, instead of read from its pod's CPU request."""

    member: int = field(
        metadata=prop("Static member id.", minimum=0, maximum=MAX_REPLICAS - 1),
    )
    cpu: str = field(
        metadata=prop(
            "Capacity in CPU cores, written as a CPU request (2, 1.5, 500m): the member is given tasks in "
            "proportion to it against the other members' capacities.",
            max_length=32,
            pattern=CPU_PATTERN,
            pattern_message="memberCapacity[].cpu must be CPU cores such as 2, 1.5 or 500m",
            rules=(
                Rule(
                    "self.matches('[1-9]')",
                    "memberCapacity[].cpu must be more than zero",
                    lambda cpu: any(c in "123456789" for c in cpu),
                ),
            ),
        )
    )


@dataclass(frozen=True, kw_only=True)
class SparkExecutors(Model):
    """Spark on Kubernetes: each member's Spark session uses the cluster as its master, and its Spark
    executors run as pods of the member's image in the app's namespace, owned by the member pod (they go
    with it)."""

    instances: int = field(
        default=1,
        metadata=prop("Spark executor pods per member (spark.executor.instances).", minimum=1, maximum=64),
    )
    cores: int = field(
        default=1, metadata=prop("Cores of each (spark.executor.cores).", minimum=1, maximum=64)
    )
    memory: str = field(
        default="1g",
        metadata=prop(
            "JVM heap of each (spark.executor.memory); Spark adds its overhead to the pod's memory.",
            max_length=16,
            pattern=SPARK_MEMORY_PATTERN,
            pattern_message="sparkExecutors.memory must be a JVM size such as 512m or 2g",
        ),
    )
    cpu_request: str = field(
        default="500m",
        metadata=prop(
            "CPU request of each executor pod (spark.kubernetes.executor.request.cores).",
            max_length=32,
            pattern=CPU_PATTERN,
            pattern_message="sparkExecutors.cpuRequest must be CPU cores such as 2, 1.5 or 500m",
        ),
    )


@dataclass(frozen=True, kw_only=True)
class Executor(Model):
    """The executor pods: image, command, resources and Spark settings of every member."""

    PATH: ClassVar[str] = "spec.executor"
    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            "!has(self.sparkExecutors) || !has(self.sparkConf) || !('spark.master' in self.sparkConf)",
            "sparkConf must not set spark.master with sparkExecutors (the master is the cluster)",
            lambda e: e.spark_executors is None or "spark.master" not in (e.spark_conf or {}),
            ".sparkConf",
        ),
        Rule(
            WIRED_CEL,
            WIRED_MESSAGE,
            lambda e: e.spark_executors is None or not refused_wired_keys(e.spark_conf or {}),
            ".sparkConf",
            message_expression=WIRED_MESSAGE_CEL,
            explain=lambda e: wired_message(e.spark_conf),
        ),
        Rule(
            "!has(self.sparkExecutors) || !has(self.serviceAccountScope) || self.serviceAccountScope == 'member'",
            "serviceAccountScope app is not allowed with sparkExecutors (each member's Spark driver "
            "creates pods under its own account)",
            lambda e: e.spark_executors is None or e.service_account_scope == "member",
            ".serviceAccountScope",
        ),
    )

    image: str = field(
        metadata=prop(
            "Container image with the streamapp distribution and the user's pipeline module.",
            max_length=1024,
            pattern=IMAGE_PATTERN,
            pattern_message="image must be an image reference such as registry/name:tag (not empty, no spaces)",
        )
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
    termination_grace_period_seconds: int = field(
        default=60,
        metadata=prop(
            "Grace period of the member pods: when a pod is deleted by someone else (an eviction, a node "
            "drain, kubectl delete), its executor keeps handing its tasks over for this long, minus a "
            "margin to commit, before it stops; a podTemplate that sets its own value wins.",
            minimum=1,
            maximum=3600,
        ),
    )
    spark_conf: dict[str, str] | None = field(
        default=None,
        metadata=prop(
            "Spark settings, e.g. spark.master or spark.sql.shuffle.partitions. Of the spark.kubernetes.* "
            "keys only API-client and allocation tuning is allowed (api/sparkconf.py); with "
            "sparkExecutors the operator also owns spark.master, spark.driver.host, "
            "spark.executor.instances, .cores, .memory and spark.dynamicAllocation.enabled.",
            max_items=SPARK_CONF_MAX_KEYS,
            rules=(
                Rule(
                    KUBERNETES_CEL,
                    KUBERNETES_MESSAGE,
                    lambda conf: not refused_kubernetes_keys(conf),
                    message_expression=KUBERNETES_MESSAGE_CEL,
                    explain=kubernetes_message,
                ),
            ),
        ),
    )
    spark_executors: SparkExecutors | None = field(
        default=None,
        metadata=prop(
            "Run each member's Spark on the cluster (a k8s:// master), its Spark executors pods of the "
            "member's image owned by the member pod, instead of inside the member pod. The member's "
            "ServiceAccount then may create, list and delete pods, services, configmaps and claims in "
            "the namespace, as Spark's driver must: give such an app a namespace of its own. Runs only "
            "where the operator allows it (--allow-spark-executors); the pods members create are held "
            "to the restricted profile, their own account and the app's image by an admission policy."
        ),
    )
    pod_template: dict[str, Any] | None = field(
        default=None,
        metadata=prop(
            "Pod template merged under the operator's pod (labels, tolerations, affinity, sidecars); it "
            "cannot choose the executors' ServiceAccount nor reuse the operator's volume names.",
            codec=POD_TEMPLATE,
        ),
    )
    service_account_scope: AccountScope = field(
        default="member",
        metadata=prop(
            "member: each member's executor has a ServiceAccount of its own, <app>-<id> (named like the "
            "member), whose token reaches only that member's target, status and pod. app: one "
            "ServiceAccount <app>-executors for every member, so a workload identity binding (IRSA, "
            "GKE) is made once, for an account that exists before the app scales; its Role reaches "
            "every member of the app, so the members must trust each other. Not with sparkExecutors."
        ),
    )
    service_account_annotations: dict[str, str] | None = field(
        default=None,
        metadata=prop(
            "Annotations on the executors' ServiceAccounts (see serviceAccountScope), for workload "
            "identity: eks.amazonaws.com/role-arn (IRSA) or iam.gke.io/gcp-service-account (GKE), so the "
            "executors reach an S3 store without a credentials Secret. Kept in step with the spec: a "
            "key removed here is removed from the accounts.",
            max_items=64,
        ),
    )
    storage: Storage = field(default_factory=Storage, metadata=prop("Per-member state volumes."))
    member_capacity: tuple[MemberCapacity, ...] | None = field(
        default=None,
        metadata=prop(
            "Members whose capacity is set here rather than read from their pod's CPU request (in "
            "cores; 1 without a request). Tasks are balanced in proportion to capacity.",
            list_map_keys=("member",),
            max_items=MAX_REPLICAS,
        ),
    )

    def capacity_overrides(self) -> dict[int, float]:
        """Member id → capacity in cores, for the members `memberCapacity` names."""
        overrides = {}
        for entry in self.member_capacity or ():
            cores = cpu_cores(entry.cpu)
            if cores is not None:
                overrides[entry.member] = cores
        return overrides


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
        # Past the other bounds the product would overflow (an evaluation error, not this message).
        Rule(
            "!has(self.rebalance) || !has(self.rebalance.standbyReplicas)"
            f" || self.partitions > {MAX_PARTITIONS} || self.rebalance.standbyReplicas > {MAX_REPLICAS}"
            f" || self.partitions * (1 + self.rebalance.standbyReplicas) <= {MAX_TASK_COPIES}",
            f"partitions * (1 + rebalance.standbyReplicas) must be <= {MAX_TASK_COPIES}: the status "
            "records every task copy and must fit in one object",
            lambda s: (
                s.partitions > MAX_PARTITIONS
                or s.rebalance.standby_replicas > MAX_REPLICAS
                or s.partitions * (1 + s.rebalance.standby_replicas) <= MAX_TASK_COPIES
            ),
            ".rebalance.standbyReplicas",
        ),
        Rule(
            "!has(self.autoscaling) || !has(self.autoscaling.minReplicas)"
            f" || (self.autoscaling.minReplicas <= self.partitions && self.autoscaling.minReplicas <= {MAX_REPLICAS})",
            f"autoscaling.minReplicas must be at most partitions and at most {MAX_REPLICAS}",
            lambda s: s.autoscaling.min_replicas <= min(s.partitions, MAX_REPLICAS),
            ".autoscaling.minReplicas",
        ),
        Rule(
            "!has(self.autoscaling) || !has(self.autoscaling.maxReplicas)"
            f" || (self.autoscaling.maxReplicas <= self.partitions && self.autoscaling.maxReplicas <= {MAX_REPLICAS})",
            f"autoscaling.maxReplicas must be at most partitions (a member beyond that gets no task) and at "
            f"most {MAX_REPLICAS}",
            lambda s: (
                s.autoscaling.max_replicas is None
                or s.autoscaling.max_replicas <= min(s.partitions, MAX_REPLICAS)
            ),
            ".autoscaling.maxReplicas",
        ),
        Rule(
            "!has(self.autoscaling) || !has(self.autoscaling.enabled) || !self.autoscaling.enabled"
            " || !has(self.autoscaling.minReplicas) || !has(self.rebalance) || !has(self.rebalance.standbyReplicas)"
            " || self.rebalance.standbyReplicas < self.autoscaling.minReplicas",
            "rebalance.standbyReplicas must be less than autoscaling.minReplicas: the autoscaler may scale in "
            "that far, and a task's standbys need members other than its owner",
            lambda s: not s.autoscaling.enabled or s.rebalance.standby_replicas < s.autoscaling.min_replicas,
            ".autoscaling.minReplicas",
        ),
    )

    replicas: int = field(
        default=3,
        metadata=prop(
            f"Executors (members 0..replicas-1, at most {MAX_REPLICAS}); the /scale subresource sets it, and "
            "so does the operator itself while autoscaling.enabled.",
            minimum=0,
            maximum=MAX_REPLICAS,
        ),
    )
    partitions: int = field(
        metadata=prop(
            "Tasks (0..partitions-1), the unit of state and of assignment; immutable, because keyed state is "
            f"partitioned by it; at most {MAX_PARTITIONS}.",
            minimum=1,
            maximum=MAX_PARTITIONS,
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

    rolling_update: RollingUpdate = field(
        default_factory=RollingUpdate,
        metadata=prop("How member pods are replaced when the executor or pipeline spec changes."),
    )
    autoscaling: Autoscaling = field(
        default_factory=Autoscaling,
        metadata=prop(
            "The operator's own autoscaler (off by default): it sets replicas from the input rate and the "
            "members' measured processing rates, and waits for each decision's warmups before the next."
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


LostTaskChoice = Literal["Wait", "Restore"]


@dataclass(frozen=True, kw_only=True)
class LostTasks(Model):
    """What the operator weighed for a lost member's tasks, and what it chose (lostTaskRecovery auto)."""

    choice: LostTaskChoice = field(
        metadata=prop(
            "Restore: some of its tasks are restored elsewhere (taken over at once, or warming to take "
            "over when restored); Wait: all wait for the member, expected back before a restore."
        )
    )
    held: int = field(default=0, metadata=prop("Tasks still held for the member."))
    restoring: int = field(default=0, metadata=prop("Of those, tasks taken over or warming elsewhere."))
    expected_back_seconds: float | None = field(
        default=None,
        metadata=prop(
            "When the member is expected to process again, in seconds after its loss (its measured "
            "restart, the app's, or the app's pod start); unset when unknown (not visibly coming back, "
            "not measured, or overdue)."
        ),
    )
    restore_seconds: float | None = field(
        default=None,
        metadata=prop(
            "The estimated restore of its slowest held task on the member that would take it (restore "
            "rows over restore rate); unset while not measured."
        ),
    )
    restore_rows: int | None = field(
        default=None,
        metadata=prop("Rows a cold restore of its held tasks applies, summed (owners' reports)."),
    )
    restore_rate: float | None = field(
        default=None, metadata=prop("Rows a second the estimate assumes (the members' measured median).")
    )
    reason: str = field(default="", metadata=prop("The choice in words, with the figures.", max_length=1000))


@dataclass(frozen=True, kw_only=True)
class Flapping(Model):
    """A member damped for flapping: lost twice within rebalance.flapWindow, so it is not trusted to
    return. While away its tasks are restored elsewhere; while up it takes no tasks and hands off what it
    holds, until it has stayed up for flapWindow (Events MemberFlapping and MemberSteady)."""

    losses: int = field(default=0, metadata=prop("Its losses within flapWindow."))
    up_since: str | None = field(
        default=None,
        metadata=prop(
            "When its pod was last seen ready again (RFC 3339); it takes tasks again once up for "
            "flapWindow from then. Unset while it is not up."
        ),
    )


@dataclass(frozen=True, kw_only=True)
class MemberSummary(Model):
    """One member as the operator sees it; its StreamAppMember lists the tasks themselves.

    Only what changes when the assignment or the pod does: a per-member lag here would change with
    every report and make each of 1,000 members' reports rewrite the app's status. Each copy's lag is
    in the member's own status; the app keeps aggregates (`inputLag`).
    """

    id: int = field(metadata=prop("Static member id; the pod is <app>-<id>."))
    pod: str | None = field(default=None, metadata=prop("Name of the member's pod, when it exists."))
    phase: MemberPhase = field(
        metadata=prop(
            "Starting, Ready, Restarting (holds tasks, its pod visibly on its way back), Lost (holds "
            "tasks, pod gone or not ready for another reason) or Draining (scale-in, or handing its tasks "
            "off before a rolling update replaces its pod). See lostTasks for what happens to the tasks "
            "of a Restarting or Lost member."
        )
    )
    active: int = field(default=0, metadata=prop("How many tasks the member processes."))
    standby: int = field(default=0, metadata=prop("How many tasks the member keeps hot copies of."))
    warmup: int = field(default=0, metadata=prop("How many tasks the member is warming up."))
    restart_seconds: float | None = field(
        default=None,
        metadata=prop(
            "How long the member's slowest task stood still when its pod last restarted (its executors' "
            "resumedAfter of tasks resumed by a restart, from its current pod's report; kept until a "
            "restart measures it again). rollingUpdate.strategy auto restarts the member in place when "
            "this is below handoffSeconds and its state is on a claim."
        ),
    )
    lost_tasks: LostTasks | None = field(
        default=None,
        metadata=prop(
            "While the member is lost and holds tasks: whether they wait for it or are restored "
            "elsewhere, and the figures that decided it."
        ),
    )
    flapping: Flapping | None = field(
        default=None, metadata=prop("While the member is damped for flapping (rebalance.flapWindow).")
    )


ScaleAction = Literal["ScaleOut", "ScaleIn", "Hold", "Wait"]


@dataclass(frozen=True, kw_only=True)
class AutoscalingStatus(Model):
    """The operator's autoscaler's last decision (spec.autoscaling): the size it wants, what it did,
    why, and what it waits for."""

    replicas: int = field(metadata=prop("The spec.replicas it wants (the current size unless it scales)."))
    action: ScaleAction = field(
        metadata=prop(
            "ScaleOut or ScaleIn (it wrote replicas), Hold (the size is right, or a change has not lasted "
            "long enough yet) or Wait (its last decision is still taking effect: new members' pods or "
            "warmups, removed members' handoffs; their lag is not new demand)."
        )
    )
    reason: str = field(metadata=prop("The decision in words, with the figures.", max_length=1000))
    waiting_for: str | None = field(
        default=None, metadata=prop("What the next decision waits for, if anything.", max_length=1000)
    )
    needed_replicas: int | None = field(
        default=None,
        metadata=prop(
            "The members the measured input rate, processing rate and lag call for (unset until measured)."
        ),
    )
    last_scale_time: str | None = field(
        default=None, metadata=prop("When it last changed replicas.", format="date-time")
    )
    state: dict[str, Any] | None = field(
        default=None,
        metadata=prop(
            "What the next decision starts from (the last decision, the changes being watched for), "
            "persisted so that a restarted operator keeps waiting where it waited."
        ),
    )


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
        metadata=prop(
            "Ready, Rebalancing, Degraded and Progressing.", list_map_keys=("type",), max_items=MAX_CONDITIONS
        ),
    )
    generation: int | None = field(
        default=None, metadata=prop("Assignment generation, bumped on every assignment change.")
    )
    replicas: int | None = field(default=None, metadata=prop("Members that exist (for /scale)."))
    ready_replicas: int | None = field(default=None, metadata=prop("Members whose pod is Ready."))
    updated_replicas: int | None = field(
        default=None, metadata=prop("Members whose pod was made from the current spec (updateRevision).")
    )
    current_revision: str | None = field(
        default=None,
        metadata=prop("Revision most members not yet updated still run; updateRevision once rolled out."),
    )
    update_revision: str | None = field(
        default=None, metadata=prop("Revision (hash) of the member pod the current spec renders.")
    )
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
        default=(), metadata=prop("Per-member summary.", list_map_keys=("id",), atomic=True)
    )
    handoff_seconds: float | None = field(
        default=None,
        metadata=prop(
            "How long a task handed off to a caught-up copy stood still: the median resumedAfter of the "
            "tasks the members report resumed by a handoff; kept until handoffs measure it again."
        ),
    )
    pod_start_seconds: float | None = field(
        default=None,
        metadata=prop(
            "How long the app's member pods take to become ready (the median over its ready pods, from "
            "creation or a container's restart to Ready): a lost member's expected return while no "
            "restart of the app is measured."
        ),
    )
    restore_rate: float | None = field(
        default=None,
        metadata=prop(
            "Rows a second the app's members restore state at from the shared store: the median of their "
            "restoreRate reports, kept when the members that measured it are scaled in; a member that "
            "has not measured its own is expected to restore at this rate.",
            minimum=0,
        ),
    )
    last_rebalance: LastRebalance | None = field(
        default=None, metadata=prop("The most recent assignment change.")
    )
    autoscaling: AutoscalingStatus | None = field(
        default=None,
        metadata=prop("The operator's autoscaler's last decision, while spec.autoscaling is enabled."),
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

    # Checked at the schema's root, where CEL sees metadata.name (a root rule cannot point its fieldPath
    # into metadata, so its message names the field): a name the operator cannot give its children (a dot
    # is no Service name, a leading digit no DNS-1035 label, a long name no hostname) would be accepted
    # and then fail at every reconcile.
    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            f"self.metadata.name.matches('{DNS_1035_LABEL}')",
            "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a "
            "letter): it names the app's Service, pods and hostnames",
            lambda app: re.match(DNS_1035_LABEL, app.metadata.name) is not None,
        ),
        Rule(
            f"size(self.metadata.name) <= {MAX_APP_NAME_LENGTH}",
            f"metadata.name must be at most {MAX_APP_NAME_LENGTH} characters, so that <name>-state-<id> "
            f"stays a 63-character DNS label for every member id below {MAX_REPLICAS}",
            lambda app: len(app.metadata.name) <= MAX_APP_NAME_LENGTH,
        ),
        Rule(
            f"!self.metadata.name.matches('{SPARK_EXECUTOR_POD_NAMES}')",
            "metadata.name must not end in -<number>-exec: Spark names the executor pods of app <a>'s "
            "member <id> <a>-<id>-exec-<n>, the names of this app's member pods",
            lambda app: re.search(SPARK_EXECUTOR_POD_NAMES, app.metadata.name) is None,
        ),
    )

    KIND: ClassVar[str] = "StreamApp"
    PLURAL: ClassVar[str] = "streamapps"
    SINGULAR: ClassVar[str] = "streamapp"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("sapp",)

    SPEC: ClassVar[type[Model]] = StreamAppSpec
    STATUS: ClassVar[type[Model]] = StreamAppStatus

    status: StreamAppStatus = field(default_factory=StreamAppStatus)

    @classmethod
    def from_resource(cls, body: Mapping[str, Any], *, served: bool = True) -> Self:
        """The app from a body, refused (ValidationError naming the field) where the API server's root
        rules would refuse it — for apps stored before those rules existed."""
        app = super().from_resource(body, served=served)
        for rule in model_rules(cls):
            if rule.check is not None and not rule.check(app):
                raise ValidationError("metadata.name", rule.message)
        return app
