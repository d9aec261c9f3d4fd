"""Path rewriting of the process node: how a pod's paths reach its emulated volumes."""

from __future__ import annotations

import json
from pathlib import Path

from processnode.volumes import mount_table, rewrite, rewrite_env

TABLE = {"/data": Path("/host/pv-1"), "/var/lib/streamapp": Path("/host/pod/state")}


def test_paths_and_file_uris_inside_a_mount_are_rewritten() -> None:
    assert rewrite("/data/input", TABLE) == "/host/pv-1/input"
    assert rewrite("/data", TABLE) == "/host/pv-1"
    assert rewrite("file:///data/state", TABLE) == "file:///host/pv-1/state"
    assert rewrite("/database", TABLE) == "/database"
    assert rewrite("s3://data/x", TABLE) == "s3://data/x"


def test_a_json_env_value_has_every_string_rewritten() -> None:
    pipeline = {
        "source": {"type": "file", "path": "/data/input"},
        "stateStore": {"uri": "file:///data/state"},
        "partitions": 12,
        "tags": ["/data/a", "plain"],
    }
    rewritten = json.loads(rewrite_env(json.dumps(pipeline), TABLE))
    assert rewritten == {
        "source": {"type": "file", "path": "/host/pv-1/input"},
        "stateStore": {"uri": "file:///host/pv-1/state"},
        "partitions": 12,
        "tags": ["/host/pv-1/a", "plain"],
    }
    assert rewrite_env("{not json", TABLE) == "{not json"
    assert rewrite_env("/var/lib/streamapp", TABLE) == "/host/pod/state"


def test_a_mount_at_tmp_is_left_to_the_hosts_tmp() -> None:
    container = {
        "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}, {"name": "data", "mountPath": "/data"}]
    }
    volumes = {"scratch": Path("/host/pod/scratch"), "data": Path("/host/pv-1")}
    assert mount_table(container, volumes) == {"/data": Path("/host/pv-1")}
