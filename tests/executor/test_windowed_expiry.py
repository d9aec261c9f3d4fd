"""Windowed state expires a lateness after newer windows: it stays bounded over a long input, every copy
deletes what the owner expired, and records for a window already final are dropped."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from dataplane_checks import executor_for
from pyspark.sql import SparkSession

from streamapp.executor.io.sink import committed_outputs
from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import Target
from streamapp.executor.samples.windowed import LATENESS_SECONDS, WINDOW_SECONDS, window_end
from streamapp.executor.state.expiry import Expiry, Sweep
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.replica import rebuild

pytestmark = pytest.mark.spark
WINDOWED = "streamapp.executor.samples.windowed:windowed"
KEYS = 40
START = datetime(2026, 1, 1, tzinfo=UTC)


def records(minutes: range, per_minute: int) -> pa.Table:
    """`per_minute` records per key and minute, in event-time order, each of value 1."""
    stamps, keys = [], []
    for minute in minutes:
        for second in range(per_minute):
            for key in range(KEYS):
                stamps.append(START + timedelta(minutes=minute, seconds=second * 60 // per_minute))
                keys.append(f"k{key}")
    return pa.table(
        {
            "timestamp": pa.array(stamps, type=pa.timestamp("us", tz="UTC")),
            "key": keys,
            "value": ["1"] * len(keys),
        }
    )


def window_key(key: str, minute: int) -> str:
    return f"{key}@{(START + timedelta(minutes=minute)).strftime('%Y-%m-%dT%H:%M:%S')}"


def test_windows_expire_so_state_stays_bounded(spark: SparkSession, tmp_path: Path) -> None:
    del spark
    hours = 3
    log = FileLog(tmp_path / "log")
    log.append(0, records(range(60 * hours), per_minute=1))
    owner = executor_for(tmp_path, log, "owner", WINDOWED, max_batch_records=400, snapshot_every=5)
    owner.apply(Target(active={0: 1}))
    sizes = []
    while owner.step() > 0:
        sizes.append(owner.status()[0].keys)
    windows_seen = KEYS * 60 * hours
    batch_minutes = 400 / KEYS
    # The sweep that finds expired windows runs beside the batches: its tombstones ride the batch after
    # the one that started it, so the state holds up to two batches' span of windows past the lateness.
    bound = KEYS * (LATENESS_SECONDS / WINDOW_SECONDS + 2 * batch_minutes + 2)
    assert max(sizes) <= bound < windows_seen / 5, "state holds only the windows within the lateness"

    state = owner.tasks[0].replica.state
    newest = max(window_end(key) for key, _ in state.items())
    # A sweep starts before each batch's own windows move the watermark on, and lands a batch later.
    oldest_allowed = newest - LATENESS_SECONDS - 2 * batch_minutes * 60
    assert all(window_end(key) >= oldest_allowed for key, _ in state.items())
    assert dict(state.items()) == {key: 1 for key, _ in state.items()}, "each open window is complete"
    assert rebuild(StateLayout(tmp_path / "state"), 0).state.values == dict(state.items()), (
        "a copy rebuilt from the changelog applies the expiry tombstones too"
    )

    final: dict[str, int | None] = {}
    for _, table in committed_outputs(StateLayout(tmp_path / "state"), tmp_path / "outputs", 0):
        final.update(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True))
    closed = [key for key, value in final.items() if value is None]
    assert len(closed) == windows_seen - len(state), "every expired window was announced as final"

    # A record for a window long final is dropped, not counted into a re-created window.
    late = records(range(0, 1), per_minute=1)
    log.append(0, late)
    owner.run_until_idle()
    assert window_key("k0", 0) not in dict(owner.tasks[0].replica.state.items())
    assert Counter(v for k, v in owner.tasks[0].replica.state.items()) == Counter({1: len(state)})


def test_rounds_go_on_while_an_expiry_sweep_is_held(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    del spark
    held, release = threading.Event(), threading.Event()
    sweep = Expiry.sweep

    def slow(self: Expiry, keys: Iterable[str], watermark: float) -> Sweep:
        held.set()
        assert release.wait(120), "the test never released the sweep"
        return sweep(self, keys, watermark)

    monkeypatch.setattr(Expiry, "sweep", slow)
    log = FileLog(tmp_path / "log")
    log.append(0, records(range(90), per_minute=1))
    owner = executor_for(tmp_path, log, "owner", WINDOWED, max_batch_records=400, snapshot_every=50)
    owner.apply(Target(active={0: 1}))
    while not held.is_set():
        assert owner.step() > 0, "a sweep was due before the input ran out"
    task = owner.tasks[0]
    at_hold = task.head.seq
    for _ in range(3):
        assert owner.step() > 0
    assert task.head.seq == at_hold + 3, "three rounds committed while the sweep was held"
    grown = len(task.replica.state)
    release.set()
    owner.run_until_idle()
    assert len(task.replica.state) < grown, "the sweep's tombstones landed once it finished"
    assert rebuild(StateLayout(tmp_path / "state"), 0).state.values == dict(task.replica.state.items())


def test_a_new_owner_takes_the_watermark_from_the_history_without_scanning_its_store(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    del spark
    log = FileLog(tmp_path / "log")
    log.append(0, records(range(120), per_minute=1))
    owner = executor_for(tmp_path, log, "owner", WINDOWED, max_batch_records=400, snapshot_every=50)
    standby = executor_for(tmp_path, log, "standby", WINDOWED, max_batch_records=400, snapshot_every=50)
    owner.apply(Target(active={0: 1}))
    standby.apply(Target(standby=frozenset({0})))
    for _ in range(8):
        assert owner.step() > 0
        standby.step()
    handed = owner.tasks[0].expiry
    assert handed is not None
    owner.apply(Target())
    owner.step()

    def scanned(self: object) -> object:
        raise AssertionError("the takeover scanned the store")

    task = standby.tasks[0]
    with monkeypatch.context() as patched:
        patched.setattr(type(task.replica.state), "items", scanned)
        standby.apply(Target(active={0: 2}))
        standby.step()
    assert task.owning
    state = dict(task.replica.state.items())
    assert task.expiry is not None
    assert task.expiry.newest == max(window_end(key) for key in state) == handed.newest
    assert task.expiry.oldest <= min(window_end(key) for key in state)

    standby.run_until_idle()
    log.append(0, records(range(0, 1), per_minute=1))  # late records for windows long final
    standby.run_until_idle()
    held = dict(task.replica.state.items())
    assert window_key("k0", 0) not in held
    assert rebuild(StateLayout(tmp_path / "state"), 0).state.values == held


def test_a_history_without_window_bounds_is_scanned_at_takeover(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches committed before manifests recorded the bounds: the new owner scans, and gets the same
    watermark."""
    del spark
    monkeypatch.setattr(Expiry, "ends", lambda self: None)  # what the manifests of that time recorded
    log = FileLog(tmp_path / "log")
    log.append(0, records(range(60), per_minute=1))
    owner = executor_for(tmp_path, log, "owner", WINDOWED, max_batch_records=400, snapshot_every=50)
    owner.apply(Target(active={0: 1}))
    owner.run_until_idle()
    assert all(m.windows is None for m in accepted_manifests(StateLayout(tmp_path / "state"), 0))
    handed = owner.tasks[0].expiry
    assert handed is not None
    owner.apply(Target())
    owner.step()

    caplog.set_level(logging.INFO, logger="streamapp.executor.task")
    successor = executor_for(tmp_path, log, "successor", WINDOWED, max_batch_records=400, snapshot_every=50)
    successor.apply(Target(active={0: 2}))
    while not successor.tasks[0].owning:
        successor.step()
    assert "window bounds not in the history" in caplog.text
    assert successor.tasks[0].expiry is not None
    assert successor.tasks[0].expiry.newest == handed.newest
