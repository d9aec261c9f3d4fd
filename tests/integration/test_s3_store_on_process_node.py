"""The shared state store on a real S3 server under the operator: executors killed mid-stream.

A StreamApp with `stateStore.uri: s3://bucket/prefix` (endpoint, region and a credentials Secret) runs
real PySpark executors on the process node; they reach the test S3 server on 127.0.0.1 with the
credentials the kubelet resolved from the Secret. Executors are SIGKILLed while input keeps arriving;
afterwards every partition's committed state and outputs, read back from the bucket, must equal a
reference computed straight from the input: nothing lost, nothing twice.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest
from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators

from chaos.faults import kill_executor
from localcluster.controlplane import LocalCluster
from localcluster.waiting import wait_for
from realapps import app_on_process_node, committed_everything
from s3server.server import REGION
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state import s3store
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout

PARTITIONS = 2
KILLS = 3
SECRET = "counts-s3"


def s3_app(tmp_path: Path, uri: str, endpoint: str) -> dict[str, Any]:
    """The process-node app with its state (and, by default, its outputs) in the bucket."""
    body = app_on_process_node(APP, tmp_path, PARTITIONS, replicas=2)
    pipeline = body["spec"]["pipeline"]
    del pipeline["sink"]  # outputs go to <state>/outputs: the bucket
    pipeline["stateStore"] = {"uri": uri, "endpoint": endpoint, "region": REGION, "credentialsSecret": SECRET}
    return body


def committed_batches(state: StateLayout) -> int:
    return sum(1 for p in range(PARTITIONS) for _ in accepted_manifests(state, p))


def test_executors_killed_on_an_s3_store_keep_output_exactly_once(
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    process_node: str,
    local_cluster: LocalCluster | None,
    s3_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    assert local_cluster is not None  # the process node runs only on the local cluster
    env = s3_server.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # for this test's own reads of the bucket
    bucket = f"e2e-{namespace}"[:63]
    s3store.client_from_env().create_bucket(Bucket=bucket)
    uri = f"s3://{bucket}/apps/counts"
    client.CoreV1Api(api_client).create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": SECRET},
            "stringData": {key: env[key] for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")},
        },
    )
    log = FileLog(tmp_path / "input")
    state = StateLayout(s3store.S3Store.from_uri(uri))
    rng = random.Random(14)
    generate(log, GenerateSpec(partitions=PARTITIONS, count=3_000, keys=50, seed=1))
    operators.start()
    body = s3_app(tmp_path, uri, s3_server.endpoint)
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(lambda: committed_batches(state) > 0, 300, "the first commit in the bucket")

    for round_ in range(KILLS):
        generate(log, GenerateSpec(partitions=PARTITIONS, count=1_500, keys=50, seed=10 + round_))
        before = committed_batches(state)
        wait_for(lambda b=before: committed_batches(state) > b, 300, "progress since the last kill")
        time.sleep(rng.uniform(0.0, 1.0))
        print(kill_executor(api_client, namespace, APP, local_cluster, rng))

    wait_for(lambda: committed_everything(state, log, PARTITIONS), 300, "all input committed after kills")
    for partition in range(PARTITIONS):
        check_partition(state, state.store.child("outputs"), log, partition)
