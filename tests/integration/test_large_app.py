"""A large app on the real API server, the short variant of `make bench-apiscale` (100,000 tasks on
1,000 members there): 2,000 tasks on 40 kwok members whose executors are played from the test
(e2e/playedmembers.py), every member reporting every 2 s with its tasks' input lag changed."""

from __future__ import annotations

import time
from pathlib import Path

from kubernetes import client
from operator_support import APP, Operators, create_app, scale

from playedmembers import PlayedMembers, object_sizes, unsettled

TASKS, MEMBERS_BEFORE, MEMBERS_AFTER = 2_000, 40, 44
SETTLE_TIMEOUT_S = 600.0
# Before the compact intent, this app's object was ~0.18 MB (~0.9 MB at 10,000 tasks; etcd refuses
# 1.5 MiB); now ~10 kB: a twentieth of a MiB leaves room for growth while catching a return to a
# per-task encoding.
OBJECT_LIMIT = 1_048_576 // 20


def wait_settled(custom: client.CustomObjectsApi, namespace: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while (waiting := unsettled(custom, namespace, APP)) is not None:
        assert time.monotonic() < deadline, f"not settled after {SETTLE_TIMEOUT_S:.0f} s: {waiting}"
        time.sleep(2.0)


def test_an_app_of_2000_tasks_is_placed_its_reports_coalesce_and_it_scales_out(
    api_client: client.ApiClient, kubeconfig_path: Path, namespace: str, operators: Operators
) -> None:
    operators.start()
    custom = client.CustomObjectsApi(api_client)
    create_app(api_client, namespace, replicas=MEMBERS_BEFORE, partitions=TASKS, maxWarmupReplicas=20)
    with PlayedMembers(kubeconfig_path, namespace, APP, interval=2.0) as played:
        wait_settled(custom, namespace)
        app_bytes, member_bytes = object_sizes(custom, namespace, APP)
        assert app_bytes < OBJECT_LIMIT and member_bytes < OBJECT_LIMIT, (app_bytes, member_bytes)

        reports, writes = played.counters.reports, played.counters.app_writes
        time.sleep(20.0)
        reports, writes = played.counters.reports - reports, played.counters.app_writes - writes
        # 40 members report 20 times a second; the operator folds them into one reconcile at a time,
        # at most one a second (--min-reconcile-interval), each writing the app once at most
        assert reports >= 100, reports
        assert writes <= 25 and writes < reports / 4, (writes, reports)

        scale(api_client, namespace, MEMBERS_AFTER)
        wait_settled(custom, namespace)
