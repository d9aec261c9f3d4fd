"""`spec.executor.sparkConf` may not steer the pods Spark's driver creates: `spark.kubernetes.*` keys off
the tuning allowlist are refused, and with `sparkExecutors` so are the keys the operator wires; the
model refuses them as the CRD does (an app stored before the CRD rule is flagged, not run), each
message naming the key."""

from __future__ import annotations

from typing import Any

import pytest
from api_samples import app_body

from streamapp.api.fields import ValidationError
from streamapp.api.sparkconf import KUBERNETES_TUNING, WIRED
from streamapp.api.streamapp import StreamApp
from streamapp.executor import sparkk8s

# What a tenant would use to have the driver create a pod they may not create themselves.
HOSTILE_KEYS = [
    "spark.kubernetes.executor.volumes.hostPath.root.mount.path",
    "spark.kubernetes.executor.volumes.hostPath.root.options.path",
    "spark.kubernetes.authenticate.executor.serviceAccountName",
    "spark.kubernetes.authenticate.oauthTokenFile",
    "spark.kubernetes.executor.podTemplateFile",
    "spark.kubernetes.container.image",
    "spark.kubernetes.executor.container.image",
    "spark.kubernetes.executor.secrets.db-password",
    "spark.kubernetes.executor.secretKeyRef.PASSWORD",
    "spark.kubernetes.executor.node.selector.kubernetes.io/hostname",
    "spark.kubernetes.executor.label.app",
    "spark.kubernetes.executor.annotation.container.apparmor.security.beta.kubernetes.io/x",
    "spark.kubernetes.executor.scheduler.name",
    "spark.kubernetes.container.image.pullSecrets",
    "spark.kubernetes.namespace",
    "spark.kubernetes.trust.certificates",
]


def app(executor: dict[str, Any]) -> dict[str, Any]:
    return app_body(partitions=2, executor=executor)


@pytest.mark.parametrize("key", HOSTILE_KEYS)
@pytest.mark.parametrize("spark_executors", [{"sparkExecutors": {}}, {}])
def test_a_spark_kubernetes_key_off_the_allowlist_is_refused_by_name(
    key: str, spark_executors: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError) as refused:
        StreamApp.from_resource(
            app({"sparkConf": {key: "x", "spark.ui.enabled": "false"}, **spark_executors})
        )
    assert refused.value.path == "spec.executor.sparkConf"
    assert f"sparkConf key {key} is not allowed" in refused.value.problem


@pytest.mark.parametrize("key", sorted(set(WIRED) - {"spark.master"}))
def test_with_spark_executors_the_keys_the_operator_wires_are_refused_by_name(key: str) -> None:
    with pytest.raises(ValidationError) as refused:
        StreamApp.from_resource(app({"sparkConf": {key: "1"}, "sparkExecutors": {}}))
    assert f"sparkConf must not set {key} with sparkExecutors" in str(refused.value)
    StreamApp.from_resource(app({"sparkConf": {key: "1"}}))  # Spark in the pod: the user's to tune


def test_tuning_keys_and_other_spark_settings_pass() -> None:
    conf = {key: "1" for key in KUBERNETES_TUNING} | {
        "spark.sql.shuffle.partitions": "2",
        "spark.executorEnv.TZ": "UTC",
        "spark.executor.memoryOverhead": "256m",
    }
    found = StreamApp.from_resource(app({"sparkConf": conf, "sparkExecutors": {}}))
    assert found.spec.executor.spark_conf == conf


def test_every_key_the_driver_wires_is_one_a_user_may_not_set() -> None:
    settings = sparkk8s.driver_settings(
        StreamApp.from_resource(app({"sparkExecutors": {}})).spec.executor.spark_executors,  # type: ignore[arg-type]
        {},
        {
            "KUBERNETES_SERVICE_HOST": "h",
            "KUBERNETES_SERVICE_PORT": "1",
            "STREAMAPP_NAMESPACE": "ns",
            "STREAMAPP_POD_NAME": "counts-0",
            "STREAMAPP_HTTP_ADDRESS": "10.0.0.1",
            "STREAMAPP_IMAGE": "img",
        },
        sparkk8s.template_path({}),
    )
    for key in settings.conf:
        with pytest.raises(ValidationError):
            StreamApp.from_resource(app({"sparkConf": {key: "x"}, "sparkExecutors": {}}))
