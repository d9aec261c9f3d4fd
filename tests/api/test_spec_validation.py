"""Specs that used to get through and then break things: the models refuse each, naming the field, and
every legitimate spec in the repository still passes (the API server runs the same rules in CEL)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_samples import MINIMAL_APP, app

from streamapp.api import StreamApp, ValidationError
from streamapp.api.streamapp import MAX_APP_NAME_LENGTH, MAX_PARTITIONS, MAX_REPLICAS
from streamapp.render.crd import crds

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = MINIMAL_APP["spec"]["pipeline"]


def pipeline(**changes: Any) -> dict[str, Any]:
    return app(pipeline={**copy.deepcopy(PIPELINE), **changes})


def executor(**changes: Any) -> dict[str, Any]:
    return app(executor={"image": "streamapp:0.1.0", **changes})


def template(**spec: Any) -> dict[str, Any]:
    return executor(podTemplate={"spec": spec})


def named(name: str) -> dict[str, Any]:
    body = app()
    body["metadata"]["name"] = name
    return body


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (pipeline(source={"type": "kafka", "path": "/in"}), "spec.pipeline.source.kafka"),
        (pipeline(sink={"type": "kafka", "path": "/out"}), "spec.pipeline.sink.kafka"),
        (
            pipeline(source={"type": "kafka", "kafka": {"bootstrapServers": "b:9092", "topic": "t/x"}}),
            "spec.pipeline.source.kafka.topic",
        ),
        (
            pipeline(
                source={
                    "type": "kafka",
                    "kafka": {
                        "bootstrapServers": "b:9092",
                        "topic": "t",
                        "properties": {"sasl.password": "x"},
                    },
                }
            ),
            "spec.pipeline.source.kafka.properties",
        ),
        (pipeline(source={"type": "file", "path": "in"}), "spec.pipeline.source.path"),
        (pipeline(stateStore={"uri": "gs://bucket/state"}), "spec.pipeline.stateStore.uri"),
        (pipeline(stateStore={"uri": "s3://B/state"}), "spec.pipeline.stateStore.uri"),
        (pipeline(stateStore={"uri": "file:///s", "region": "eu-west-1"}), "spec.pipeline.stateStore"),
        (
            pipeline(stateStore={"uri": "s3://bkt/s", "endpoint": "minio:9000"}),
            "spec.pipeline.stateStore.endpoint",
        ),
        (
            pipeline(stateStore={"uri": "s3://bkt/s", "credentialsSecret": "A_B"}),
            "spec.pipeline.stateStore.credentialsSecret",
        ),
        (pipeline(stateStore={"uri": "state"}), "spec.pipeline.stateStore.uri"),
        (pipeline(stateStore={"uri": "file://state"}), "spec.pipeline.stateStore.uri"),
        (pipeline(mrege="sum"), "spec.pipeline"),
        (pipeline(source={"type": "file", "path": "/in", "topic": "t"}), "spec.pipeline.source"),
        (executor(storage={"size": "lots"}), "spec.executor.storage.size"),
        (executor(storage={"size": "0Gi"}), "spec.executor.storage.size"),
        (app(executor={"image": ""}), "spec.executor.image"),
        (app(executor={"image": "my image"}), "spec.executor.image"),
        (executor(podTemplate={"spec": {"containers": "x"}}), "spec.executor.podTemplate.spec.containers"),
        (template(containers=[{"image": "i"}]), "spec.executor.podTemplate.spec.containers[0].name"),
        (template(containers=[{"name": "side"}]), "spec.executor.podTemplate.spec.containers[0].image"),
        (
            template(initContainers=[{"name": "executor"}]),
            "spec.executor.podTemplate.spec.initContainers[0].image",
        ),
        (template(serviceAccountName="admin"), "spec.executor.podTemplate.spec.serviceAccountName"),
        (template(serviceAccount="admin"), "spec.executor.podTemplate.spec.serviceAccount"),
        (
            template(automountServiceAccountToken=False),
            "spec.executor.podTemplate.spec.automountServiceAccountToken",
        ),
        (
            template(volumes=[{"name": "state", "emptyDir": {}}]),
            "spec.executor.podTemplate.spec.volumes[0].name",
        ),
        (
            template(volumes=[{"name": "scratch", "emptyDir": {}}]),
            "spec.executor.podTemplate.spec.volumes[0].name",
        ),
        (executor(podTemplate={"spek": {}}), "spec.executor.podTemplate"),
        # Shapes that made every reconcile raise instead of being refused (the env and mounts are
        # merged with the operator's by name and path, the grace period is arithmetic).
        (
            template(containers=[{"name": "executor", "env": [{"value": "x"}]}]),
            "spec.executor.podTemplate.spec.containers[0].env[0].name",
        ),
        (
            template(containers=[{"name": "executor", "volumeMounts": [{"name": "data"}]}]),
            "spec.executor.podTemplate.spec.containers[0].volumeMounts[0].mountPath",
        ),
        (
            template(terminationGracePeriodSeconds="soon"),
            "spec.executor.podTemplate.spec.terminationGracePeriodSeconds",
        ),
        (
            template(terminationGracePeriodSeconds=-1),
            "spec.executor.podTemplate.spec.terminationGracePeriodSeconds",
        ),
        (app(partitions=MAX_PARTITIONS + 1), "spec.partitions"),
        (app(replicas=MAX_REPLICAS + 1), "spec.replicas"),
        (
            app(partitions=MAX_PARTITIONS, replicas=10, rebalance={"standbyReplicas": 9}),
            "spec.rebalance.standbyReplicas",
        ),
        (executor(memberCapacity=[{"member": 0, "cpu": "0"}]), "spec.executor.memberCapacity[0].cpu"),
        (executor(memberCapacity=[{"member": 0, "cpu": "0.0m"}]), "spec.executor.memberCapacity[0].cpu"),
        (executor(memberCapacity=[{"member": 1, "cpu": "2 cores"}]), "spec.executor.memberCapacity[0].cpu"),
        (executor(memberCapacity=[{"member": 1, "cpu": "1Gi"}]), "spec.executor.memberCapacity[0].cpu"),
        (executor(memberCapacity=[{"member": -1, "cpu": "1"}]), "spec.executor.memberCapacity[0].member"),
        (executor(memberCapacity=[{"member": 1}]), "spec.executor.memberCapacity[0].cpu"),
        (app(rollingUpdate={"maxUnavailable": 0}), "spec.rollingUpdate.maxUnavailable"),
        (app(rollingUpdate={"strategy": "surge"}), "spec.rollingUpdate.strategy"),
        (app(rollingUpdate={"handoffTimeout": "soon"}), "spec.rollingUpdate.handoffTimeout"),
        (app(rollingUpdate={"handoffTimeout": "721h"}), "spec.rollingUpdate.handoffTimeout"),
        (
            app(rebalance={"scheduledRebalanceMaxDelay": "99999h"}),
            "spec.rebalance.scheduledRebalanceMaxDelay",
        ),
        (app(rebalance={"revocationTimeout": "720h1s"}), "spec.rebalance.revocationTimeout"),
        (named("my.app"), "metadata.name"),
        (named("1app"), "metadata.name"),
        (named("a" * (MAX_APP_NAME_LENGTH + 1)), "metadata.name"),
    ],
)
def test_hostile_spec_is_refused_naming_the_field(body: dict[str, Any], path: str) -> None:
    with pytest.raises(ValidationError) as raised:
        StreamApp.from_resource(body, served=False)
    assert raised.value.path == path, str(raised.value)


def test_the_longest_name_leaves_every_child_name_a_dns_label() -> None:
    name = "a" * MAX_APP_NAME_LENGTH
    assert StreamApp.from_resource(named(name)).metadata.name == name
    last = MAX_REPLICAS - 1
    assert max(len(f"{name}-state-{last}"), len(f"{name}-{last}")) <= 63


@pytest.mark.parametrize(
    "body",
    [
        app(partitions=MAX_PARTITIONS, replicas=MAX_REPLICAS, rebalance={"standbyReplicas": 1}),
        app(partitions=MAX_PARTITIONS // 4, replicas=MAX_REPLICAS, rebalance={"standbyReplicas": 7}),
        executor(storage={"size": "1Gi"}),
        app(
            rollingUpdate={
                "strategy": "handoff",
                "maxUnavailable": 2,
                "paused": True,
                "handoffTimeout": "90s",
            }
        ),
        executor(storage={"size": "0.5Ti"}),
        executor(memberCapacity=[{"member": 2, "cpu": "2"}, {"member": 0, "cpu": "500m"}]),
        executor(memberCapacity=[{"member": MAX_REPLICAS - 1, "cpu": ".25"}]),
        pipeline(stateStore={"uri": "file:///tmp/pytest-of-root/state"}),
        pipeline(source={"type": "file", "path": "/in", "options": {"chunk": 10}}, options={"x": 1}),
        template(
            nodeSelector={"kubernetes.io/os": "linux"},
            securityContext={"fsGroup": 65532},
            containers=[
                {"name": "executor", "env": [{"name": "STREAMAPP_HTTP_PORT", "value": "0"}]},
                {"name": "sidecar", "image": "busybox"},
            ],
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "counts-data"}}],
        ),
    ],
)
def test_legitimate_specs_pass(body: dict[str, Any]) -> None:
    StreamApp.from_resource(body)


def _stream_apps(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc and doc.get("kind") == "StreamApp"]


@pytest.mark.parametrize(
    "path",
    sorted(
        p
        for p in (
            *ROOT.glob("manifests/**/*.yaml"),
            *ROOT.glob("e2e/**/*.yaml"),
            *ROOT.glob("bench/**/*.yaml"),
        )
        if "kind: StreamApp\n" in p.read_text()
    ),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_sample_in_the_repository_passes(path: Path) -> None:
    for body in _stream_apps(path):
        StreamApp.from_resource(body)


def test_the_crd_declares_the_bounds_and_closes_the_pipeline() -> None:
    root = crds()[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = root["properties"]["spec"]
    assert spec["properties"]["replicas"]["maximum"] == MAX_REPLICAS
    assert any("metadata.name" in r["rule"] for r in root["x-kubernetes-validations"])
    pipeline_schema = spec["properties"]["pipeline"]
    assert "x-kubernetes-preserve-unknown-fields" not in pipeline_schema
    assert all(
        "x-kubernetes-preserve-unknown-fields" not in pipeline_schema["properties"][key]
        for key in ("source", "sink", "stateStore")
    )
    kinds = pipeline_schema["properties"]["source"]["properties"]["type"]["x-kubernetes-validations"]
    assert [rule["rule"] for rule in kinds] == ["self in ['file', 'kafka']"]
