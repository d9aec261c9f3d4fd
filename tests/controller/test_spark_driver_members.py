"""`spec.executor.sparkExecutors`: the operator tells the member pod to be Spark's driver on the cluster
(its image and the executors' shape in its environment) and grants its ServiceAccount what a driver
needs; without it, a member gets neither."""

from __future__ import annotations

import json
from typing import Any

from test_s3_pod_env import app, pod_env

from streamapp.api.names import IMAGE_ENV, SPARK_EXECUTORS_ENV
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children
from streamapp.controller.permissions import spark_driver_rules

FILE_STORE = {"uri": "file:///data/state"}
IMAGE = "registry.example.com/streamapp:1"


def role_rules(found: StreamApp) -> list[dict[str, Any]]:
    (role,) = [o for o in children.executor_identity(found, 0) if o["kind"] == "Role"]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_a_spark_driver_member_learns_its_executors_and_may_create_their_pods() -> None:
    found = app(FILE_STORE, {"image": IMAGE, "sparkExecutors": {"instances": 2, "memory": "512m"}})
    env = pod_env(found)
    assert json.loads(env[SPARK_EXECUTORS_ENV]) == {
        "instances": 2,
        "cores": 1,
        "memory": "512m",
        "cpuRequest": "500m",
    }
    assert env[IMAGE_ENV] == IMAGE
    assert all(rule in role_rules(found) for rule in spark_driver_rules())


def test_a_member_running_spark_in_its_pod_gets_no_pod_rights() -> None:
    found = app(FILE_STORE)
    assert SPARK_EXECUTORS_ENV not in pod_env(found)
    assert not any(rule in role_rules(found) for rule in spark_driver_rules())
