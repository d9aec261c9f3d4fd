"""Exactly-once under SIGKILL: a real executor process is killed at named points of the commit protocol
and at random moments, restarted (sometimes as a new owner epoch) each time, and the committed state and
outputs must equal a reference computed straight from the input — 0 lost, 0 duplicated. `make test`
kills it once at every point on the S3 store (the short plan, on the real test S3 server: the store a
cluster keeps its state in, whose create-once writes and listings differ most from a filesystem's);
`make test-long` runs the full plan (every point, random-time kills, a second crash while restoring) on
the filesystem store, whose every point the short plan would repeat. The filesystem store is killed in
`make test` too, with the operator around it (`tests/integration/test_member_local_state.py`).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dataplane_checks import COUNTS, Stores, check_partition

from streamapp import faults
from streamapp.api.streamapp import DEFAULT_LOCAL_STORE
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import LocalState
from streamapp.executor.state.replica import rebuild

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SEED = 20261121
RANDOM_KILLS = 2
RUN_TIMEOUT = 300.0


def crash_plan(rng: random.Random, full: bool = True) -> list[str | None]:
    """Each batch crash point at a seeded n-th arrival, snapshot and restore crashes, and random-time
    kills (None), in a seeded order. Not `full`: every point once, no second restore crash and no
    random kills (the S3 store's run: the same protocol points in less time).
    """
    batch_points = [point for point in faults.POINTS if point.startswith("batch.")]
    plan: list[str | None] = [f"{point}:{rng.randint(1, 3)}" for point in batch_points]
    plan += ["snapshot.written:1", "restore.segment-applied:1", "checkpoint.persisted:2"]
    if full:
        plan += ["restore.segment-applied:2", *[None] * RANDOM_KILLS]
    rng.shuffle(plan)
    return plan


def executor_command(root: Path, stores: Stores, epoch: int, member: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamapp.executor.dataplanecli",
        "dataplane",
        "--state",
        stores.state.describe(),
        "--sink",
        stores.outputs.describe(),
        "--log",
        str(root / "log"),
        "--pipeline",
        COUNTS,
        "--active",
        f"0={epoch},1={epoch}",
        "--member",
        member,
        "--max-batch-records",
        "1500",
        "--snapshot-every",
        "3",
        "--status",
        str(root / "status.json"),
        "--local-state",
        str(root / "local"),
        "--until-idle",
        "--conf",
        "spark.sql.shuffle.partitions=2",
    ]


def run_once(
    root: Path, stores: Stores, crash: str | None, epoch: int, member: str, rng: random.Random
) -> int:
    """Run the executor once; with `crash` None it is killed from outside after a random delay."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop(faults.ENV, None)
    if crash is not None:
        env[faults.ENV] = crash
    status = root / "status.json"
    status.unlink(missing_ok=True)
    with (root / "executor.log").open("ab") as out:
        process = subprocess.Popen(
            executor_command(root, stores, epoch, member), env=env, stdout=out, stderr=out
        )
        if crash is None:
            deadline = time.monotonic() + RUN_TIMEOUT
            while not status.exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 1.5))
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
        return process.wait(RUN_TIMEOUT)


@pytest.mark.parametrize(
    ("stores", "full"),
    [
        ("s3", False),
        pytest.param("file", True, marks=pytest.mark.long),
    ],
    indirect=["stores"],
)
def test_sigkill_at_every_point_loses_and_duplicates_nothing(
    tmp_path: Path, stores: Stores, full: bool
) -> None:
    rng = random.Random(SEED)
    log = FileLog(tmp_path / "log")
    spec = GenerateSpec(partitions=2, count=6_000, keys=800, seed=SEED)
    outcomes: list[tuple[str | None, int]] = []
    for index, crash in enumerate(crash_plan(rng, full=full)):
        generate(log, spec)
        epoch = 1 + index // 4
        outcomes.append((crash, run_once(tmp_path, stores, crash, epoch, f"member-{epoch}", rng)))

    env = {k: v for k, v in os.environ.items() if k != faults.ENV}
    final = subprocess.run(
        executor_command(tmp_path, stores, 99, "final"),
        env=env,
        capture_output=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert final.returncode == 0, final.stderr.decode()[-3000:]

    killed = [crash for crash, code in outcomes if code == -signal.SIGKILL]
    assert all(code in (0, -signal.SIGKILL) for _, code in outcomes), outcomes
    assert {c for c in killed if c} >= {c for c, _ in outcomes if c and not c.startswith("restore.")}, (
        outcomes
    )
    assert any(c and c.startswith("restore.") for c in killed), "no run died while restoring"

    layout = StateLayout(stores.state)
    for partition in (0, 1):
        assert check_partition(layout, stores.outputs, log, partition) > 0
    # The member's local stores, checkpointed through every kill, hold exactly the committed state.
    local = LocalState(tmp_path / "local", DEFAULT_LOCAL_STORE)  # the store the executor's CLI keeps
    for partition in (0, 1):
        store, checkpoint, _ = local.open(partition)
        assert checkpoint is not None and checkpoint.head.offset == log.end_offset(partition)
        assert dict(store.items()) == rebuild(layout, partition).state.values
    # Files of attempts that died or lost are removed once their sequence number is decided: what is
    # left is exactly what the manifests name (no orphans, and no committed file lost to the cleanup).
    named = {name for p in (0, 1) for m in accepted_manifests(layout, p) for name in m.outputs}
    sink = stores.outputs
    stored = {f"{part}/{entry}" for part in sink.names("") for entry, _ in sink.leftovers(part)}
    assert stored == named
