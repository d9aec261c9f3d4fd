"""Spark on Kubernetes for a member (`spec.executor.sparkExecutors`): the member is Spark's driver in
client mode and its Spark executors are pods of the same image, owned by the member pod (why:
docs/design.md, "Spark on Kubernetes").

Two sides, both pure but for the last step:

- the driver's Spark settings, from the member pod's environment: the cluster as master (the
  `kubernetes` Service the kubelet names in every pod), the pod's own name (Spark makes it the owner of
  its executor pods, so they go with it), its IP as the address executors connect back to, its image,
  and a pod template that passes the `restricted` Pod Security level;
- `streamapp spark-executor`, the executor pods' entrypoint: what Spark's own images do in their
  `entrypoint.sh executor`, a `KubernetesExecutorBackend` JVM from the environment Spark gives the pod,
  with the jars of the installed PySpark.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamapp.api.names import IMAGE_ENV
from streamapp.api.security import container_security_context, pod_security_context
from streamapp.api.streamapp import SparkExecutors
from streamapp.executor.spark import SparkSettings

CONTAINER = "spark-executor"
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


def executor_pod_template() -> dict[str, Any]:
    """The executor pods' template: the member pods' own restricted security settings and our
    entrypoint (Spark adds the argument `executor` and everything else: image, resources, environment,
    an emptyDir at /tmp for its local directories, the owner reference to the member pod)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "securityContext": pod_security_context(),
            "containers": [
                {
                    "name": CONTAINER,
                    "command": ["/usr/bin/tini", "--", "streamapp", "spark-executor"],
                    "securityContext": container_security_context(),
                }
            ],
        },
    }


def driver_settings(
    executors: SparkExecutors, conf: Mapping[str, str], env: Mapping[str, str], template: Path
) -> SparkSettings:
    """The member's Spark settings as the driver of `executors` on the cluster; `conf` (the app's
    sparkConf) is applied over them, so a user may tune anything but the master."""
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
    return SparkSettings(master=f"k8s://https://{host}:{port}", conf={**wired, **conf})


def write_template(path: Path) -> None:
    """Write the executors' pod template where `driver_settings` told Spark to read it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(executor_pod_template(), indent=2) + "\n")


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
