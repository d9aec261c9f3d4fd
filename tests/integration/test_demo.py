"""`make demo`'s driver, short: on the session's cluster it installs the chart, runs real executors
through the scale-out and the executor kill, checks the output exactly once, plots, and removes what it
created (it did not start this cluster, so it leaves the cluster running)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from kubernetes import client

from demo.driver import NAMESPACE, RELEASE_NAMESPACE, Result, Settings, run
from demo.view import Screen
from localcluster.controlplane import LocalCluster

pytestmark = pytest.mark.demo


def test_demo_driver_runs_the_story_and_cleans_up(
    local_cluster: LocalCluster | None, api_client: client.ApiClient, process_node: str, tmp_path: Path
) -> None:
    if local_cluster is None:
        pytest.skip("the demo drives the local control plane (it kills executors through the process node)")
    out = io.StringIO()
    result = Result()
    code = run(Settings(out=tmp_path, rate=50.0, steady_s=5.0), Screen(out), result)
    text = out.getvalue()
    assert code == 0, text
    assert result.exactly_once.startswith("ok"), text
    assert result.records > 0 and result.batches > 0
    assert [gap.partition for gap in result.gaps] == [0, 1, 2, 3]
    assert all(gap.commits > 0 for gap in result.gaps)
    assert result.plot is not None and result.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    labels = ("scale 2 → 3 via /scale", "SIGKILL", "committing elsewhere", "handed back", "measured downtime")
    for label in labels:
        assert label in text
    names = {n.metadata.name for n in client.CoreV1Api(api_client).list_namespace().items}
    assert not names & {NAMESPACE, RELEASE_NAMESPACE}
    assert local_cluster.is_running()
