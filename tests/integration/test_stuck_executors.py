"""A stuck Spark on real executors: two members' JVMs are stopped (SIGSTOP) at once, their pods stay
ready and their executors go on reporting; the operator replaces them after `batchTimeout`, one at a
time (`rollingUpdate.maxUnavailable: 1`), and the app's output stays exactly-once.

Judged from the outside: the pods' readiness sampled every half second never shows two of the three
members unavailable at once, both pods are new, the operator said `MemberStuck`, and every partition's
output equals a reference computed from the input. About five minutes (two Spark starts after the
timeout): in `make test-long`; `make test` has the simulator's `stuck-members` and the unit tests.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client
from nodeapp import NodeApp, pod_uid
from operator_support import reasons

from localcluster.waiting import wait_for

PARTITIONS = 6
REPLICAS = 3
BATCH_TIMEOUT_SECONDS = 45


def jvms_under(pid: int) -> list[int]:
    """The java processes descended from `pid` (the executor's Spark driver JVM)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)], names[int(entry.name)] = int(fields[1]), name
    found = []
    for child, name in names.items():
        ancestor = parents.get(child)
        while ancestor not in (None, 0, 1):
            if ancestor == pid:
                if name == "java":
                    found.append(child)
                break
            ancestor = parents.get(ancestor)
    return found


@pytest.mark.long
def test_stopped_jvms_get_their_members_replaced_one_at_a_time(
    api_client: client.ApiClient, namespace: str, node_app: Callable[..., NodeApp]
) -> None:
    app = node_app(
        partitions=PARTITIONS,
        replicas=REPLICAS,
        count=3_000,
        keys=1_000,
        spec={"rollingUpdate": {"maxUnavailable": 1}},
        batchTimeout=f"{BATCH_TIMEOUT_SECONDS}s",
    )
    wait_for(app.settled, 300, "every member processing, nothing moving")

    before = {m: pod_uid(api_client, namespace, m) for m in (1, 2)}
    for member in (1, 2):
        jvms = jvms_under(app.executor(member))
        assert jvms, f"member {member}'s executor runs no JVM"
        for jvm in jvms:
            os.kill(jvm, signal.SIGSTOP)
    stopped_at = time.time()
    app.more_input(1_000, 1_000, seed=2)

    def replaced() -> bool:
        unavailable = sum(1 for m in range(REPLICAS) if not app.ready(m))
        assert unavailable <= 1, f"{unavailable} members unavailable at once"
        return all(app.ready(m) and pod_uid(api_client, namespace, m) != before[m] for m in (1, 2))

    wait_for(replaced, 600, "both stuck members replaced and ready", interval_s=0.5)
    assert time.time() - stopped_at >= BATCH_TIMEOUT_SECONDS
    assert reasons(api_client, namespace).count("MemberStuck") >= 1
    wait_for(app.processed, 400, "all input committed")
    app.check_output()
