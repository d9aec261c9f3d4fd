"""An S3 state store reaches the executor pods as the standard AWS variables, credentials only by
reference to a Secret (resolved by the kubelet), never as values and never read by the executors."""

from __future__ import annotations

from typing import Any

from api_samples import app_model

from streamapp.api.streamapp import StreamApp
from streamapp.controller import children


def app(store: dict[str, Any], executor: dict[str, Any] | None = None) -> StreamApp:
    """An app of one member with this state store (and these `spec.executor` fields besides the image)."""
    return app_model(partitions=2, state_store=store, executor=executor)


def pod_env(found: StreamApp) -> dict[str, Any]:
    """The executor container's environment in member 0's pod: values, or their sources."""
    (container,) = [c for c in children.pod(found, 0)["spec"]["containers"] if c["name"] == "executor"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def env_of(store: dict[str, Any]) -> dict[str, Any]:
    return pod_env(app(store))


def test_endpoint_region_and_secret_references_become_pod_env() -> None:
    env = env_of(
        {
            "uri": "s3://bucket/apps/counts",
            "endpoint": "http://s3.local:9000",
            "region": "eu-west-1",
            "credentialsSecret": "counts-s3",
        }
    )
    assert env["AWS_ENDPOINT_URL_S3"] == "http://s3.local:9000" and env["AWS_REGION"] == "eu-west-1"
    assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "counts-s3", "key": "AWS_ACCESS_KEY_ID"}}
    assert env["AWS_SECRET_ACCESS_KEY"] == {
        "secretKeyRef": {"name": "counts-s3", "key": "AWS_SECRET_ACCESS_KEY"}
    }
    assert "s3://bucket/apps/counts" in env["STREAMAPP_PIPELINE"]


def test_without_a_secret_the_pods_use_their_identity_and_a_file_store_gets_nothing() -> None:
    s3 = env_of({"uri": "s3://bucket/apps/counts"})
    assert not [name for name in s3 if name.startswith("AWS_")]
    assert not [name for name in env_of({"uri": "file:///data/state"}) if name.startswith("AWS_")]
