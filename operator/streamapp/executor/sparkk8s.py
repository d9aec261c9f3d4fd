"""Spark on Kubernetes for a member (`spec.executor.sparkExecutors`): the member is Spark's driver in
client mode and its Spark executors are pods of the same image, owned by the member pod (why:
docs/design.md, "Spark on Kubernetes").

Two sides, both pure but for the last step:

- the driver's Spark settings, from the member pod's environment: the cluster as master (the
  `kubernetes` Service the kubelet names in every pod), the pod's own name (Spark makes it the owner of
  its executor pods, so they go with it), its IP as the address executors connect back to, its image,
  and a pod template derived from the member pod as the API server admitted it (`executor_pod_template`:
  its pod and executor-container securityContexts, its own ServiceAccount, no API token); the app's
  sparkConf goes under these settings, never over them (its `spark.kubernetes.*` keys are checked by
  `api.sparkconf` before a pod exists);
- `streamapp spark-executor`, the executor pods' entrypoint: what Spark's own images do in their
  `entrypoint.sh executor`, a `KubernetesExecutorBackend` JVM from the environment Spark gives the pod,
  with the jars of the installed PySpark.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamapp.api.names import IMAGE_ENV
from streamapp.api.streamapp import SparkExecutors
from streamapp.executor.spark import SparkSettings

CONTAINER = "spark-executor"
# The member pod's own container (`controller.children`), whose securityContext the executors take.
MEMBER_CONTAINER = "executor"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
# (flag, environment variable) pairs of the backend's command line, as Spark's executor pods carry them.
BACKEND_FLAGS = (
    ("--driver-url", "SPARK_DRIVER_URL"),
    ("--executor-id", "SPARK_EXECUTOR_ID"),
    ("--cores", "SPARK_EXECUTOR_CORES"),
    ("--app-id", "SPARK_APPLICATION_ID"),
    ("--hostname", "SPARK_EXECUTOR_POD_IP"),
    ("--resourceProfileId", "SPARK_RESOURCE_PROFILE_ID"),
    ("--podName", "SPARK_EXECUTOR_POD_NAME"),
)


class SparkOnKubernetesError(ValueError):
    """The pod lacks what Spark on Kubernetes needs (named in the message)."""


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise SparkOnKubernetesError(f"{name} is not set: Spark on Kubernetes needs it in the pod")
    return value


def template_path(env: Mapping[str, str]) -> Path:
    """Where the driver writes its executors' pod template (the image's only writable place)."""
    return Path(env.get("TMPDIR") or "/tmp") / "streamapp-spark-executor-pod.json"


def executor_pod_template(member_pod: Mapping[str, Any]) -> dict[str, Any]:
    """The executor pods' template, derived from the member pod as admitted (its `spec`, camelCase):
    the pod's securityContext and the executor container's, so executors are held to whatever the
    member was held to (the restricted profile unless the install allows more); the member's own
    ServiceAccount, set explicitly so Spark cannot pick another; no API token mounted (executors never
    call the API server); the member's image pull secrets (they run its image). Spark adds the argument
    `executor` and everything else: image, resources, environment, an emptyDir at /tmp for its local
    directories, the owner reference to the member pod."""
    spec = member_pod.get("spec") or {}
    account = spec.get("serviceAccountName")
    if not account:
        raise SparkOnKubernetesError("the member pod has no serviceAccountName for its executors to use")
    member = next((c for c in spec.get("containers") or [] if c.get("name") == MEMBER_CONTAINER), None)
    if member is None:
        raise SparkOnKubernetesError(f"the member pod has no container named {MEMBER_CONTAINER}")
    pod_spec: dict[str, Any] = {
        "serviceAccountName": account,
        "automountServiceAccountToken": False,
        "securityContext": copy.deepcopy(spec.get("securityContext") or {}),
        "containers": [
            {
                "name": CONTAINER,
                "command": ["/usr/bin/tini", "--", "streamapp", "spark-executor"],
                "securityContext": copy.deepcopy(member.get("securityContext") or {}),
            }
        ],
    }
    if spec.get("imagePullSecrets"):
        pod_spec["imagePullSecrets"] = copy.deepcopy(spec["imagePullSecrets"])
    return {"apiVersion": "v1", "kind": "Pod", "spec": pod_spec}


def driver_settings(
    executors: SparkExecutors, conf: Mapping[str, str], env: Mapping[str, str], template: Path
) -> SparkSettings:
    """The member's Spark settings as the driver of `executors` on the cluster. `conf` (the app's
    sparkConf, checked by `api.sparkconf`) goes under the wired settings: should a key the operator
    sets get past the checks, the operator's value still wins."""
    host = _required(env, "KUBERNETES_SERVICE_HOST")
    port = _required(env, "KUBERNETES_SERVICE_PORT")
    pod = _required(env, "STREAMAPP_POD_NAME")
    wired = {
        "spark.kubernetes.namespace": _required(env, "STREAMAPP_NAMESPACE"),
        "spark.kubernetes.driver.pod.name": pod,
        "spark.kubernetes.executor.podNamePrefix": pod,
        "spark.driver.host": _required(env, "STREAMAPP_HTTP_ADDRESS"),
        "spark.kubernetes.container.image": _required(env, IMAGE_ENV),
        "spark.kubernetes.executor.podTemplateFile": str(template),
        "spark.kubernetes.executor.podTemplateContainerName": CONTAINER,
        "spark.kubernetes.authenticate.caCertFile": str(SERVICE_ACCOUNT_DIR / "ca.crt"),
        "spark.kubernetes.authenticate.oauthTokenFile": str(SERVICE_ACCOUNT_DIR / "token"),
        "spark.executor.instances": str(executors.instances),
        "spark.executor.cores": str(executors.cores),
        "spark.executor.memory": executors.memory,
        "spark.kubernetes.executor.request.cores": executors.cpu_request,
        "spark.dynamicAllocation.enabled": "false",
    }
    return SparkSettings(master=f"k8s://https://{host}:{port}", conf={**conf, **wired})


def write_template(path: Path, member_pod: Mapping[str, Any]) -> None:
    """Write the executors' pod template, derived from `member_pod`, where `driver_settings` told Spark
    to read it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(executor_pod_template(member_pod), indent=2) + "\n")


def backend_argv(env: Mapping[str, str], jars: Path, java: str = "java") -> list[str]:
    """The executor JVM's command line: the heap Spark sized, its `SPARK_JAVA_OPT_<n>` options in
    order, PySpark's jars, and the backend's flags from the pod's environment."""
    memory = _required(env, "SPARK_EXECUTOR_MEMORY")
    options = sorted(
        (
            (int(name.rsplit("_", 1)[1]), value)
            for name, value in env.items()
            if name.startswith("SPARK_JAVA_OPT_")
        ),
    )
    classpath = ":".join(filter(None, [env.get("SPARK_CLASSPATH", ""), f"{jars}/*"]))
    flags = [part for flag, name in BACKEND_FLAGS for part in (flag, _required(env, name))]
    return [
        java,
        f"-Xms{memory}",
        f"-Xmx{memory}",
        *(value for _, value in options),
        "-cp",
        classpath,
        BACKEND,
        *flags,
    ]


def pyspark_jars() -> Path:
    """The jars of the installed PySpark (its distribution ships Spark's Kubernetes support)."""
    found = importlib.util.find_spec("pyspark")
    if found is None or found.origin is None:
        raise SparkOnKubernetesError("pyspark is not installed")
    return Path(found.origin).parent / "jars"


def run_executor(args: argparse.Namespace) -> int:
    """Replace this process with the executor JVM (tini stays PID 1 and forwards signals to it)."""
    argv = backend_argv(os.environ, pyspark_jars())
    os.execvp(argv[0], argv)


def register(subparsers: Any) -> None:
    """Add the `spark-executor` subcommand."""
    command = subparsers.add_parser(
        "spark-executor",
        help="entrypoint of the Spark executor pods of a member whose Spark runs on the cluster",
    )
    command.add_argument(
        "role", nargs="?", default="executor", help="what Spark asks the pod to be (executor)"
    )
    command.set_defaults(run=run_executor)
