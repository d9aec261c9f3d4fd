"""A large app on the real API server, the short variant of `make bench-apiscale` (100,000 tasks on
1,000 members there): 2,000 tasks on 40 kwok members whose executors are played from the test
(e2e/playedmembers.py), every member reporting every 2 s with its tasks' input lag changed; and
100,000 tasks scaled in onto one member, written by the operator's and the executor's own code."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client
from operator_support import APP, Operators, create_app, scale

from playedmembers import PlayedMembers, object_sizes, unsettled
from simulatedplane import SimulatedDataPlane
from streamapp.api.names import APPS, GROUP, MEMBERS, VERSION, member_name
from streamapp.api.streamapp import StreamApp
from streamapp.controller import intentrebuild
from streamapp.controller.kube import Kube
from streamapp.controller.observe import member_status
from streamapp.controller.reconcile import _write_member_specs
from streamapp.executor.membership import MembershipClient
from streamapp.rebalance import Assignment
from streamapp.rebalance.model import TaskAssignment

TASKS, MEMBERS_BEFORE, MEMBERS_AFTER = 2_000, 40, 44
SETTLE_TIMEOUT_S = 600.0
# Before the compact intent, this app's object was ~0.18 MB (~0.9 MB at 10,000 tasks; etcd refuses
# 1.5 MiB); now ~10 kB: a twentieth of a MiB leaves room for growth while catching a return to a
# per-task encoding.
OBJECT_LIMIT = 1_048_576 // 20
SCALE_IN_TASKS = 100_000
# The whole member object (target, report, metadata) of the survivor: a third less than etcd's 1.5 MiB
# at worst (`api.member`: packed target < 0.58 MB, report <= 0.5 MiB); this one, planned, is far less.
SCALE_IN_OBJECT_LIMIT = 1_048_576


def wait_settled(custom: client.CustomObjectsApi, namespace: str) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while (waiting := unsettled(custom, namespace, APP)) is not None:
        assert time.monotonic() < deadline, f"not settled after {SETTLE_TIMEOUT_S:.0f} s: {waiting}"
        time.sleep(2.0)


@pytest.mark.long
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


def test_a_scale_in_of_100000_tasks_onto_one_member_is_written_and_acknowledged(
    api_client: client.ApiClient, namespace: str, crds: None
) -> None:
    """Two members → one with 100,000 tasks, through the operator's own member writes
    (`_write_member_specs`, two waves) and the executor's own follow-and-report path
    (`MembershipClient`), on the real API server: every target and report is accepted (in list form
    the survivor's target was ~2.7 MB, over etcd's 1.5 MiB, and its report ~9 MB), and the members
    read back give every task an owner at the epoch it was given."""
    custom = client.CustomObjectsApi(api_client)
    create_app(api_client, namespace, replicas=2, partitions=SCALE_IN_TASKS)
    model = StreamApp.from_resource(custom.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP))
    kube = Kube(api_client)
    halves = Assignment(
        generation=1, tasks=tuple(TaskAssignment(active=t % 2, epoch=1) for t in range(SCALE_IN_TASKS))
    )
    revoking = Assignment(  # member 1 lets its half go while member 0 warms it up
        generation=2,
        tasks=tuple(
            TaskAssignment(active=0, epoch=1)
            if t % 2 == 0
            else TaskAssignment(active=1, epoch=1, revoking_since=2, warmups=(0,))
            for t in range(SCALE_IN_TASKS)
        ),
    )
    moved = Assignment(
        generation=3,
        tasks=tuple(TaskAssignment(active=0, epoch=1 + t % 2) for t in range(SCALE_IN_TASKS)),
    )

    def members() -> list[dict[str, Any]]:
        listing = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)
        return list(listing["items"])

    for step in (halves, revoking, moved):
        _write_member_specs(kube, model, SimpleNamespace(assignment=step), members(), frozenset())  # type: ignore[arg-type]
        rebuilt = intentrebuild.intent_from_members(members(), SCALE_IN_TASKS)
        assert [(t.active, t.epoch) for t in rebuilt.tasks] == [(t.active, t.epoch) for t in step.tasks]
        assert rebuilt.generation == step.generation

    [survivor] = [m for m in members() if m["spec"]["memberId"] == 0]
    executor = MembershipClient(api_client, namespace, APP, 0, "pod-0", SimulatedDataPlane(1_000.0, 5_000))
    executor.notice(survivor)  # follows the target, then reports it applied
    body = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, member_name(APP, 0))
    report = member_status(body)
    assert report.observed_generation == moved.generation
    assert sorted(t.task for t in report.tasks if t.role == "active") == list(range(SCALE_IN_TASKS))
    assert len(json.dumps(body, separators=(",", ":"))) < SCALE_IN_OBJECT_LIMIT
