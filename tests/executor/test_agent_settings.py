"""The member pod's settings, read from the environment the operator gives it."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from streamapp.executor.podsettings import PodSettings, SetupError

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


def start_executor(tmp_path: Path, state_uri: str, extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The pod's command, as the pod runs it, in a process of its own, on a file log under `tmp_path`
    and no cluster to report to."""
    pipeline = {
        "transform": "streamapp.executor.samples.counts:counts",
        "source": {"type": "file", "path": str(tmp_path / "in")},
        "stateStore": {"uri": state_uri},
    }
    env = {
        **os.environ,
        **ENV,
        "STREAMAPP_PIPELINE": json.dumps(pipeline),
        "KUBECONFIG": str(tmp_path / "none"),
        **extra,
    }
    return subprocess.run(
        [sys.executable, "-m", "streamapp.cli", "executor", "--from-cluster", "--http-port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_spark_conf_spark_refuses_is_a_setup_error_not_a_crash(tmp_path: Path) -> None:
    """An executor started with a sparkConf its JVM cannot start with exits 2 saying so (the operator
    shows the setup error it reports in the app's Degraded condition), instead of a crash loop with a
    traceback and no reason in the app's status. Run as the pod runs it, in a process of its own (this
    one's Spark session, if any, would be reused whatever the conf)."""
    done = start_executor(
        tmp_path,
        f"file://{tmp_path / 'state'}",
        {"STREAMAPP_SPARK_CONF": json.dumps({"spark.driver.memory": "lots"})},
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot start: Spark did not start with spec.executor.sparkConf" in done.stderr


class _StoresEveryPut(http.server.BaseHTTPRequestHandler):
    """An S3 endpoint that stores every PUT, `If-None-Match: *` or not: what a server ignoring
    conditional writes answers. The puts it saw are counted on the server."""

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.conditional_puts += "If-None-Match" in self.headers  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("ETag", '"0"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_an_executor_refuses_an_s3_server_that_ignores_conditional_writes(tmp_path: Path) -> None:
    """It exits 2 before starting Spark, saying why (and reports it as the member's setup error), instead
    of running where two owners of a task could both commit the same batch."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StoresEveryPut)
    server.conditional_puts = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = {
            "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{server.server_address[1]}",
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "a",
            "AWS_SECRET_ACCESS_KEY": "b",
        }
        done = start_executor(tmp_path, "s3://bucket/app", endpoint)
    finally:
        server.shutdown()
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot start: s3://bucket/app: the S3 server ignores conditional writes" in done.stderr
    assert server.conditional_puts == 2  # type: ignore[attr-defined]


def test_an_executor_refuses_a_state_store_root_another_app_owns(tmp_path: Path) -> None:
    """It exits 2 before touching the root, naming the app that owns it (and reports it as the member's
    setup error, which the operator shows in the app's Degraded condition), instead of committing into
    another app's history."""
    root = tmp_path / "state"
    root.mkdir()
    (root / "owner.json").write_text(json.dumps({"namespace": "team-a", "app": "counts"}))
    done = start_executor(tmp_path, f"file://{root}", {})
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"cannot start: state store {root} belongs to app team-a/counts" in done.stderr
    assert sorted(p.name for p in root.iterdir()) == ["owner.json"]
