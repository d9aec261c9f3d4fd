"""Which `spec.executor.sparkConf` keys an app may set: Spark's Kubernetes settings decide what pods a
Spark driver creates, so they are the operator's, not the author's.

With `spec.executor.sparkExecutors` the member is Spark's driver and creates its executor pods with its
own ServiceAccount (`executor/sparkk8s.py`). Every `spark.kubernetes.*` key shapes those pods: volumes
(`...executor.volumes.hostPath.*`), Secrets (`...executor.secrets.*`, `...secretKeyRef.*`), the
ServiceAccount (`...authenticate.*`), the pod template, the image, node selectors, labels and
annotations. A StreamApp author who may not create pods could otherwise have the driver create any
pod for them. So the rule is an allowlist: a `spark.kubernetes.*` key is allowed only if it tunes how
the driver talks to the API server or sizes what it asks for (`KUBERNETES_TUNING`); every other one is
refused, with or without `sparkExecutors` (without it no Kubernetes master is used, so such a key has
no use). With `sparkExecutors`, the other keys the operator wires (`WIRED`) are refused too: the
executors' shape comes from `sparkExecutors`, the driver's address from the pod.

The same rules are CEL rules of the CRD (`api.streamapp.Executor`, with a message naming the key) and
Python checks of the model (for apps stored before the CRD had them: such an app gets `Degraded` with
reason `InvalidSpec`); the driver also applies the user's conf under its own settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

KUBERNETES_PREFIX = "spark.kubernetes."
# At most this many keys: it bounds what the API server estimates the CEL rules over them to cost.
SPARK_CONF_MAX_KEYS = 256
# `spark.kubernetes.*` keys that change no pod's rights, volumes, identity, image or placement: API
# client timeouts and polling, the pace of executor allocation, resource sizes, and whether finished
# executor pods are kept (they still go with their member pod).
KUBERNETES_TUNING = frozenset(
    {
        "spark.kubernetes.allocation.batch.size",
        "spark.kubernetes.allocation.batch.delay",
        "spark.kubernetes.allocation.executor.timeout",
        "spark.kubernetes.allocation.maxPendingPods",
        "spark.kubernetes.executor.apiPollingInterval",
        "spark.kubernetes.executor.eventProcessingInterval",
        "spark.kubernetes.executor.missingPodDetectDelta",
        "spark.kubernetes.executor.enablePollingWithResourceVersion",
        "spark.kubernetes.executor.checkAllContainers",
        "spark.kubernetes.executor.deleteOnTermination",
        "spark.kubernetes.executor.limit.cores",
        "spark.kubernetes.memoryOverheadFactor",
        "spark.kubernetes.local.dirs.tmpfs",
        "spark.kubernetes.container.image.pullPolicy",
        "spark.kubernetes.submission.connectionTimeout",
        "spark.kubernetes.submission.requestTimeout",
        "spark.kubernetes.driver.connectionTimeout",
        "spark.kubernetes.driver.requestTimeout",
    }
)
# What the operator sets beside the `spark.kubernetes.*` keys when Spark runs on the cluster
# (`executor.sparkk8s.driver_settings`): the master, the driver's address and the executors' shape.
WIRED = (
    "spark.master",
    "spark.driver.host",
    "spark.executor.instances",
    "spark.executor.cores",
    "spark.executor.memory",
    "spark.dynamicAllocation.enabled",
)


def _quoted(values: Iterable[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in sorted(values)) + "]"


def kubernetes_key_refused(key: str) -> bool:
    """A `spark.kubernetes.*` key that is not on the tuning allowlist."""
    return key.startswith(KUBERNETES_PREFIX) and key not in KUBERNETES_TUNING


def refused_kubernetes_keys(conf: Mapping[str, str]) -> list[str]:
    """The conf's `spark.kubernetes.*` keys off the allowlist, sorted."""
    return sorted(key for key in conf if kubernetes_key_refused(key))


def refused_wired_keys(conf: Mapping[str, str]) -> list[str]:
    """The conf's keys the operator wires when Spark runs on the cluster, sorted."""
    return sorted(key for key in conf if key in WIRED)


# CEL over the sparkConf map (`self`), as `kubernetes_key_refused`.
_REFUSED_KEY = f"k.startsWith('{KUBERNETES_PREFIX}') && !(k in {_quoted(KUBERNETES_TUNING)})"
KUBERNETES_CEL = f"!self.exists(k, {_REFUSED_KEY})"
KUBERNETES_MESSAGE = (
    "sparkConf may set only these spark.kubernetes.* keys (the operator sets the others): "
    + ", ".join(sorted(KUBERNETES_TUNING))
)
KUBERNETES_MESSAGE_CEL = (
    f"'sparkConf key ' + self.filter(k, {_REFUSED_KEY})[0] + ' is not allowed: only these "
    f"spark.kubernetes.* keys are ({', '.join(sorted(KUBERNETES_TUNING))})'"
)
# CEL over the executor (`self`), as `refused_wired_keys` with sparkExecutors.
WIRED_CEL = (
    f"!has(self.sparkExecutors) || !has(self.sparkConf) || !{_quoted(WIRED)}.exists(k, k in self.sparkConf)"
)
WIRED_MESSAGE = "sparkConf must not set what the operator sets with sparkExecutors: " + ", ".join(WIRED)
WIRED_MESSAGE_CEL = (
    f"'sparkConf must not set ' + {_quoted(WIRED)}.filter(k, k in self.sparkConf)[0] + "
    "' with sparkExecutors (the operator sets it from sparkExecutors and the pod)'"
)


def kubernetes_message(conf: Mapping[str, str]) -> str:
    """The Python twin of `KUBERNETES_MESSAGE_CEL`."""
    first = refused_kubernetes_keys(conf)[0]
    return (
        f"sparkConf key {first} is not allowed: only these spark.kubernetes.* keys are "
        f"({', '.join(sorted(KUBERNETES_TUNING))})"
    )


def wired_message(conf: Mapping[str, str]) -> str:
    """The Python twin of `WIRED_MESSAGE_CEL`."""
    first = refused_wired_keys(conf)[0]
    return f"sparkConf must not set {first} with sparkExecutors (the operator sets it from sparkExecutors and the pod)"
