"""The member pod's settings, read from the environment the operator gives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def test_a_spark_conf_spark_refuses_is_a_setup_error_not_a_crash(tmp_path: Path) -> None:
    """An executor started with a sparkConf its JVM cannot start with exits 2 saying so (the operator
    shows the setup error it reports in the app's Degraded condition), instead of a crash loop with a
    traceback and no reason in the app's status. Run as the pod runs it, in a process of its own (this
    one's Spark session, if any, would be reused whatever the conf)."""
    env = {
        **os.environ,
        **ENV,
        "STREAMAPP_PIPELINE": json.dumps(
            {
                "transform": "streamapp.executor.samples.counts:counts",
                "source": {"type": "file", "path": str(tmp_path / "in")},
                "stateStore": {"uri": f"file://{tmp_path / 'state'}"},
            }
        ),
        "STREAMAPP_SPARK_CONF": json.dumps({"spark.driver.memory": "lots"}),
        "KUBECONFIG": str(tmp_path / "none"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "streamapp.cli", "executor", "--from-cluster", "--http-port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot start: Spark did not start with spec.executor.sparkConf" in done.stderr
