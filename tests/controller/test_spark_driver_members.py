"""`spec.executor.sparkExecutors`: the operator tells the member pod to be Spark's driver on the cluster
(its image and the executors' shape in its environment) and grants its ServiceAccount what a driver
needs; without it, a member gets neither."""

from __future__ import annotations

import json
from typing import Any

from streamapp.api.names import IMAGE_ENV, SPARK_EXECUTORS_ENV
from streamapp.api.rbac import spark_driver_rules
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children


def app(executor: dict[str, Any]) -> StreamApp:
    return StreamApp.from_resource(
        {
            "apiVersion": "streamapp.dev/v1alpha1",
            "kind": "StreamApp",
            "metadata": {"name": "counts", "namespace": "ns", "uid": "u1"},
            "spec": {
                "replicas": 1,
                "partitions": 2,
                "pipeline": {
                    "transform": "streamapp.executor.samples.counts:counts",
                    "source": {"type": "file", "path": "/data/input"},
                    "stateStore": {"uri": "file:///data/state"},
                },
                "executor": {"image": "registry.example.com/streamapp:1", **executor},
            },
        }
    )


def env_of(found: StreamApp) -> dict[str, Any]:
    (container,) = [c for c in children.pod(found, 0)["spec"]["containers"] if c["name"] == "executor"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def role_rules(found: StreamApp) -> list[dict[str, Any]]:
    (role,) = [o for o in children.executor_identity(found, 0) if o["kind"] == "Role"]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_a_spark_driver_member_learns_its_executors_and_may_create_their_pods() -> None:
    found = app({"sparkExecutors": {"instances": 2, "memory": "512m"}})
    env = env_of(found)
    assert json.loads(env[SPARK_EXECUTORS_ENV]) == {
        "instances": 2,
        "cores": 1,
        "memory": "512m",
        "cpuRequest": "500m",
    }
    assert env[IMAGE_ENV] == "registry.example.com/streamapp:1"
    assert all(rule in role_rules(found) for rule in spark_driver_rules())


def test_a_member_running_spark_in_its_pod_gets_no_pod_rights() -> None:
    found = app({})
    assert SPARK_EXECUTORS_ENV not in env_of(found)
    assert not any(rule in role_rules(found) for rule in spark_driver_rules())
