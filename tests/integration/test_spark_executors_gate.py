"""`spec.executor.sparkExecutors` is a privilege of the install (`--allow-spark-executors`): the shipped
gate policy refuses it at apply time; an app that has it (stored before the upgrade) is flagged by an
operator that does not allow it — Degraded/InvalidSpec and a Warning Event naming the field — while
its running pod is left as it is; the app stays editable, so its owner can remove the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import tenancy
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import Operators
from test_hostile_specs import base, invalid_spec, pods_of, warnings

from localcluster.waiting import wait_for
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.controller.admission import SPARK_ALLOW_FLAG
from streamapp.render import admissionpolicy, sparkpolicy

TIMEOUT_S = 120.0
FIELD = "spec.executor.sparkExecutors"


def spark_app(name: str) -> dict[str, Any]:
    body = base(name)
    body["spec"]["executor"]["sparkExecutors"] = {"instances": 1}
    return body


@contextmanager
def gate(api_client: client.ApiClient, namespace: str) -> Iterator[None]:
    """The generated gate, bound as installs bind it but to this test's namespace only."""
    policy, binding = sparkpolicy.gate_policy(), admissionpolicy.binding(sparkpolicy.GATE_NAME)
    with tenancy.bound_to(api_client, namespace, policy, binding):
        yield


def test_an_install_that_does_not_allow_spark_executors_flags_an_existing_app_and_leaves_its_pod(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    objects, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    # Before the upgrade: an install that runs such apps.
    before = operators.start("op-allowing", extra=(SPARK_ALLOW_FLAG,))
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, spark_app("spk"))
    running = wait_for(lambda: pods_of(core, namespace, "spk") or None, TIMEOUT_S, "spk-0 created")
    before.stop()
    # After it, without the flag: flagged, nothing touched.
    operators.start("op-default")
    message = wait_for(lambda: invalid_spec(objects, namespace, "spk"), TIMEOUT_S, "spk flagged")
    assert FIELD in message and SPARK_ALLOW_FLAG in message, message
    events = wait_for(lambda: warnings(core, namespace, "spk"), TIMEOUT_S, "spk's Warning Event")
    assert any(FIELD in event for event in events), events
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, APPS, "spk", {"spec": {"replicas": 2}})
    assert pods_of(core, namespace, "spk") == running, "the operator touched the flagged app's pod"


def test_the_gate_refuses_spark_executors_at_apply_time_and_lets_an_existing_app_be_edited(
    api_client: client.ApiClient, namespace: str, crds: None
) -> None:
    objects = client.CustomObjectsApi(api_client)
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, spark_app("old"))
    with gate(api_client, namespace):
        _gated(objects, namespace)


def _gated(objects: client.CustomObjectsApi, namespace: str) -> None:

    def refused() -> str | None:
        try:
            objects.create_namespaced_custom_object(
                GROUP, VERSION, namespace, APPS, spark_app("new"), dry_run="All"
            )
        except ApiException as error:
            if error.status == 422:
                return str(json.loads(error.body)["message"])
            raise
        return None

    message = wait_for(refused, 30, "the gate to take effect")
    assert FIELD in message and SPARK_ALLOW_FLAG in message
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, base("plain"), dry_run="All")
    # Adding it to an app that lacked it is refused as well.
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, base("plain"))
    with pytest.raises(ApiException) as added:
        objects.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, APPS, "plain", {"spec": {"executor": {"sparkExecutors": {}}}}
        )
    assert added.value.status == 422 and SPARK_ALLOW_FLAG in added.value.body
    # An app stored before the gate stays editable (its owner can scale it, or drop the field).
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, APPS, "old", {"spec": {"replicas": 2}})
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, "old", {"spec": {"executor": {"sparkExecutors": None}}}
    )
