"""The member pod's settings, read from the environment the operator gives it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamapp.executor.agent import PodSettings, SetupError

ENV = {
    "STREAMAPP_APP": "counts",
    "STREAMAPP_NAMESPACE": "ns",
    "STREAMAPP_MEMBER_ID": "2",
    "STREAMAPP_POD_NAME": "counts-2",
    "STREAMAPP_POD_UID": "uid-2",
    "STREAMAPP_PIPELINE": json.dumps(
        {
            "transform": "streamapp.executor.samples.counts:counts",
            "source": {"type": "file", "path": "/data/in"},
            "stateStore": {"uri": "file:///data/state"},
        }
    ),
    "STREAMAPP_SPARK_CONF": json.dumps({"spark.master": "local[2]", "spark.ui.enabled": "false"}),
}


def test_settings_from_the_pod_environment() -> None:
    settings = PodSettings.from_env(ENV)
    assert (settings.app, settings.member, settings.pod_uid) == ("counts", 2, "uid-2")
    assert settings.state_uri == "file:///data/state" and settings.log_path == Path("/data/in")
    assert settings.spark.master == "local[2]" and settings.spark.conf == {"spark.ui.enabled": "false"}
    assert settings.sink_path is None


def test_an_s3_state_store_is_taken_as_its_uri() -> None:
    pipeline = {**json.loads(ENV["STREAMAPP_PIPELINE"]), "stateStore": {"uri": "s3://bucket/apps/counts"}}
    settings = PodSettings.from_env({**ENV, "STREAMAPP_PIPELINE": json.dumps(pipeline)})
    assert settings.state_uri == "s3://bucket/apps/counts"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"STREAMAPP_POD_UID": ""}, "STREAMAPP_POD_UID"),
        ({"STREAMAPP_PIPELINE": "{not json"}, "not valid JSON"),
        (
            {"STREAMAPP_PIPELINE": json.dumps({"source": {"type": "kafka", "uri": "kafka://b/t"}})},
            "needs kafka.bootstrapServers",
        ),
        (
            {
                "STREAMAPP_PIPELINE": json.dumps(
                    {"source": {"type": "file", "path": "/in"}, "stateStore": {"uri": "gs://bucket/state"}}
                )
            },
            "file://",
        ),
    ],
)
def test_unusable_environments_are_named(change: dict[str, str], message: str) -> None:
    with pytest.raises(SetupError, match=message):
        PodSettings.from_env({**ENV, **change})
