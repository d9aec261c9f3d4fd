"""Spark on Kubernetes, without a cluster: the driver's settings from the member pod's environment,
the executor pods' template and the command line their entrypoint runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_agent_settings import ENV
from test_s3_pod_env import app

from streamapp.api.names import IMAGE_ENV, SPARK_EXECUTORS_ENV, executor_account
from streamapp.api.security import container_security_context, pod_security_context
from streamapp.api.streamapp import SparkExecutors
from streamapp.controller import children
from streamapp.controller.admission import violations
from streamapp.executor import sparkk8s
from streamapp.executor.podsettings import PodSettings, SetupError

POD = {
    "KUBERNETES_SERVICE_HOST": "10.0.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "STREAMAPP_NAMESPACE": "team",
    "STREAMAPP_POD_NAME": "counts-2",
    "STREAMAPP_HTTP_ADDRESS": "10.90.0.7",
    IMAGE_ENV: "registry.example.com/streamapp:1",
}


def test_the_driver_is_wired_to_its_pod_and_the_app_conf_goes_under_it(tmp_path: Path) -> None:
    executors = SparkExecutors(instances=3, cores=2, memory="2g", cpu_request="1")
    user = {
        "spark.executor.memory": "3g",
        "spark.kubernetes.executor.podTemplateFile": "/elsewhere.json",
        "spark.kubernetes.container.image": "attacker/image",
        "spark.sql.shuffle.partitions": "2",
    }
    settings = sparkk8s.driver_settings(executors, user, POD, tmp_path / "t.json")
    assert settings.master == "k8s://https://10.0.0.1:443"
    conf = settings.conf
    assert conf["spark.kubernetes.namespace"] == "team"
    assert conf["spark.kubernetes.driver.pod.name"] == "counts-2"  # Spark makes it the executors' owner
    assert conf["spark.driver.host"] == "10.90.0.7"
    assert conf["spark.kubernetes.container.image"] == "registry.example.com/streamapp:1"
    assert conf["spark.kubernetes.executor.podTemplateFile"] == str(tmp_path / "t.json")
    assert (conf["spark.executor.instances"], conf["spark.executor.cores"]) == ("3", "2")
    assert conf["spark.executor.memory"] == "2g", "what the operator wires wins over the app's sparkConf"
    assert conf["spark.sql.shuffle.partitions"] == "2", "the rest of the app's sparkConf applies"


@pytest.mark.parametrize("missing", sorted(POD))
def test_a_pod_without_what_the_driver_needs_is_refused_by_name(missing: str, tmp_path: Path) -> None:
    pod = {k: v for k, v in POD.items() if k != missing}
    with pytest.raises(sparkk8s.SparkOnKubernetesError, match=missing):
        sparkk8s.driver_settings(SparkExecutors(), {}, pod, tmp_path / "t.json")


def test_the_executor_pods_are_derived_from_the_member_pod_and_start_our_entrypoint() -> None:
    """The member's pod as the operator makes it, from a template that tightens its securityContexts:
    the executors get exactly the member's, its own ServiceAccount and no API token."""
    found = app(
        {"uri": "file:///data/state"},
        {
            "image": "img",
            "sparkExecutors": {},
            "podTemplate": {
                "spec": {
                    "securityContext": {"runAsUser": 1234, "supplementalGroups": [5]},
                    "imagePullSecrets": [{"name": "registry"}],
                    "containers": [
                        {
                            "name": "executor",
                            "securityContext": {
                                "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}
                            },
                        }
                    ],
                }
            },
        },
    )
    member = children.pod(found, 0)
    template = sparkk8s.executor_pod_template(member)
    assert list(violations(template)) == []
    spec = template["spec"]
    assert spec["securityContext"] == member["spec"]["securityContext"]
    assert spec["securityContext"]["runAsUser"] == 1234
    assert spec["securityContext"]["seccompProfile"] == pod_security_context()["seccompProfile"]
    (container,) = spec["containers"]
    (executor,) = [c for c in member["spec"]["containers"] if c["name"] == "executor"]
    assert container["securityContext"] == executor["securityContext"]
    assert container["securityContext"]["seccompProfile"]["type"] == "Localhost"
    assert container["securityContext"]["capabilities"] == container_security_context()["capabilities"]
    assert spec["serviceAccountName"] == executor_account("counts", 0)
    assert spec["automountServiceAccountToken"] is False
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert container["name"] == sparkk8s.CONTAINER
    assert container["command"][-2:] == ["streamapp", "spark-executor"]
    with pytest.raises(sparkk8s.SparkOnKubernetesError, match="serviceAccountName"):
        sparkk8s.executor_pod_template({"spec": {"containers": member["spec"]["containers"]}})


def test_the_backend_command_line_keeps_spark_s_option_order() -> None:
    env = {
        "SPARK_EXECUTOR_MEMORY": "512m",
        "SPARK_JAVA_OPT_10": "-Dten",
        "SPARK_JAVA_OPT_2": "-Dtwo",
        "SPARK_JAVA_OPT_0": "-Dzero",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.90.0.7:7078",
        "SPARK_EXECUTOR_ID": "1",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "spark-app",
        "SPARK_EXECUTOR_POD_IP": "10.90.0.9",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "counts-2-exec-1",
    }
    argv = sparkk8s.backend_argv(env, Path("/venv/pyspark/jars"))
    assert argv[:6] == ["java", "-Xms512m", "-Xmx512m", "-Dzero", "-Dtwo", "-Dten"]
    assert argv[6:9] == ["-cp", "/venv/pyspark/jars/*", sparkk8s.BACKEND]
    assert argv[argv.index("--hostname") + 1] == "10.90.0.9"
    assert argv[argv.index("--podName") + 1] == "counts-2-exec-1"
    with pytest.raises(sparkk8s.SparkOnKubernetesError, match="SPARK_DRIVER_URL"):
        sparkk8s.backend_argv({k: v for k, v in env.items() if k != "SPARK_DRIVER_URL"}, Path("/j"))


def test_the_installed_pyspark_ships_spark_s_kubernetes_support() -> None:
    assert list(sparkk8s.pyspark_jars().glob("spark-kubernetes_*.jar"))


def test_the_member_becomes_a_driver_only_when_the_operator_says_so() -> None:
    local = PodSettings.from_env(ENV)
    assert local.spark_template is None and local.spark.master == "local[2]"
    executors = json.dumps(SparkExecutors(instances=2).to_dict())
    conf = json.dumps({"spark.ui.enabled": "false"})
    driver = PodSettings.from_env(
        {**ENV, **POD, "STREAMAPP_SPARK_CONF": conf, SPARK_EXECUTORS_ENV: executors}
    )
    assert driver.spark.master.startswith("k8s://") and driver.spark_template is not None
    assert driver.spark.conf["spark.executor.instances"] == "2"
    with pytest.raises(SetupError, match=SPARK_EXECUTORS_ENV):
        PodSettings.from_env({**ENV, SPARK_EXECUTORS_ENV: executors})  # no Kubernetes service in the env
