"""Local state on the member's volume: a returning member replays only the delta; anything it cannot
trust (no checkpoint, a torn one, one of another history) means a full restore — and the result is the
committed state either way."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from dataplane_checks import check_partition, commit, executor_for
from pyspark.sql import SparkSession

from streamapp.api.streamapp import LocalStoreKind
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.runtime import Executor, Target
from streamapp.executor.state import changelog, lmdbstore, snapshots
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.lmdbstore import DIRECTORY, OPEN_MARKER, LmdbStore
from streamapp.executor.state.localstate import CHECKPOINT, Checkpoint, LocalState, LocalStateError
from streamapp.executor.state.manifest import Head
from streamapp.executor.state.replica import Replica
from streamapp.executor.state.retention import Retention
from streamapp.executor.task import DEFAULT_RETENTION, TaskStatus

BATCH = 1_000


def spec(count: int, seed: int) -> GenerateSpec:
    return GenerateSpec(partitions=1, count=count, keys=3_000, seed=seed)


def run_member(
    root: Path,
    log: FileLog,
    member: str,
    local: Path,
    kind: LocalStoreKind,
    epoch: int,
    batch: int = BATCH,
    retention: Retention | None = None,
) -> Executor:
    """Own partition 0 at `epoch` until the log is consumed, then release it (the task checkpoints)."""
    executor = executor_for(
        root,
        log,
        member,
        local=LocalState(local, kind),
        max_batch_records=batch,
        snapshot_every=4,
        retention=retention or DEFAULT_RETENTION,
    )
    executor.apply(Target(active={0: epoch}))
    executor.run_until_idle()
    return executor


def stop(executor: Executor) -> None:
    executor.apply(Target())
    assert executor.context.local is not None
    executor.context.local.close()


def rows_after(layout: StateLayout, seq: int) -> int:
    """Rows in the segments of the accepted manifests after `seq`: what a resume must replay."""
    return sum(
        changelog.read_table(layout, name).num_rows
        for found in accepted_manifests(layout, 0)
        if found.seq > seq
        for name in found.segments
    )


def history(tmp_path: Path, kind: LocalStoreKind) -> tuple[FileLog, Checkpoint]:
    """Member a processes 9,000 records and leaves; member b commits 3,000 more; a's checkpoint."""
    log = FileLog(tmp_path / "log")
    generate(log, spec(9_000, 1))
    stop(run_member(tmp_path, log, "a", tmp_path / "local-a", kind, epoch=1))
    checkpoint = Checkpoint.parse((tmp_path / "local-a" / "p=0" / CHECKPOINT).read_bytes())
    assert checkpoint.head.offset == 9_000
    generate(log, spec(3_000, 2))
    stop(run_member(tmp_path, log, "b", tmp_path / "local-b", kind, epoch=2))
    return log, checkpoint


def come_back(tmp_path: Path, log: FileLog, local: Path, kind: LocalStoreKind, epoch: int = 3) -> TaskStatus:
    """Member a owns partition 0 again; its task's status once it processed everything."""
    generate(log, spec(500, 3))
    a = run_member(tmp_path, log, "a", local, kind, epoch=epoch)
    task = a.status()[0]
    stop(a)
    assert task.applied_offset == log.end_offset(0)
    return task


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_a_returning_member_replays_only_the_delta(
    spark: SparkSession, tmp_path: Path, kind: LocalStoreKind
) -> None:
    del spark
    log, checkpoint = history(tmp_path, kind)
    layout = StateLayout(tmp_path / "state")
    delta = rows_after(layout, checkpoint.head.seq)
    task = come_back(tmp_path, log, tmp_path / "local-a", kind)
    assert task.restored_blocking == delta > 0, "exactly the rows member b committed while a was away"
    assert delta < task.keys
    assert task.full_restores == 0
    check_partition(layout, tmp_path / "outputs", log, 0)
    store, _, _ = LocalState(tmp_path / "local-a", kind).open(0)
    assert dict(store.items()) == dict(Counter(log.read_arrow(0).column("key").to_pylist()))


@pytest.mark.spark
@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("none", None),
        ("torn", "checkpoint-unusable"),
        ("foreign", "history-changed"),
        ("other-kind", "checkpoint-unusable"),
    ],
)
def test_state_it_cannot_trust_is_restored_in_full(
    spark: SparkSession, tmp_path: Path, damage: str, reason: str | None
) -> None:
    """`none`: a new volume (a pod without its claim: no local state, so no fallback to count); `torn`:
    a half-written checkpoint; `foreign`: a volume that saw another app's history; `other-kind`: the
    app switched local stores. Each fallback is counted with its reason."""
    del spark
    log, _ = history(tmp_path, "memory")
    local = tmp_path / "local-a"
    kind: LocalStoreKind = "memory"
    if damage == "none":
        local = tmp_path / "fresh"
    elif damage == "torn":
        path = local / "p=0" / CHECKPOINT
        path.write_bytes(path.read_bytes()[:-20])
    elif damage == "foreign":
        other = tmp_path / "other"
        generate(FileLog(other / "log"), spec(9_000, 1))
        stop(run_member(other, FileLog(other / "log"), "a", tmp_path / "local-foreign", "memory", epoch=1))
        local = tmp_path / "local-foreign"
    else:
        kind = "lmdb"
    task = come_back(tmp_path, log, local, kind)
    assert task.restored_blocking >= task.keys == len(set(log.read_arrow(0).column("key").to_pylist()))
    assert (task.full_restores, task.full_restore_reason) == ((0, None) if reason is None else (1, reason))
    check_partition(StateLayout(tmp_path / "state"), tmp_path / "outputs", log, 0)


def away(tmp_path: Path, batches: int, retention: Retention, batch: int = 50) -> tuple[FileLog, Checkpoint]:
    """Member a processes 2,000 records and leaves; member b then commits `batches` batches of `batch`
    records, snapshotting every 4 and compacting with `retention` (as if that much time passed while
    a was down: a process that stays up deletes its local state of a task gone that long); a's
    checkpoint."""
    log = FileLog(tmp_path / "log")
    generate(log, spec(2_000, 1))
    stop(run_member(tmp_path, log, "a", tmp_path / "local-a", "memory", epoch=1))
    checkpoint = Checkpoint.parse((tmp_path / "local-a" / "p=0" / CHECKPOINT).read_bytes())
    generate(log, spec(batch * batches, 2))
    b = run_member(
        tmp_path, log, "b", tmp_path / "local-b", "memory", epoch=2, batch=batch, retention=retention
    )
    assert b.status()[0].applied_seq >= checkpoint.head.seq + batches
    stop(b)
    return log, checkpoint


@pytest.mark.spark
def test_a_member_returning_after_60_batches_within_its_retention_finds_its_delta_and_takes_the_cheaper_way(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Fifteen snapshots and compactions ran while it was away: they kept the changelog after its
    checkpoint, which its mark in the shared store names, instead of compacting it into the snapshots.
    Its ~9,000 changed rows are more than the state's keys, so restoring in full reads less than
    replaying them: it does, and says why (`delta-larger`)."""
    del spark
    log, checkpoint = away(tmp_path, 60, DEFAULT_RETENTION, batch=150)
    layout = StateLayout(tmp_path / "state")
    assert [(m.member, m.seq) for m in changelog.read_marks(layout, 0) if m.member == "a"] == [
        ("a", checkpoint.head.seq)
    ]
    assert len(snapshots.newest_first(layout, 0)) == 2, "snapshots were taken and pruned"
    delta = rows_after(layout, checkpoint.head.seq)  # raises if a segment after the mark was compacted
    keys = len(set(log.read_arrow(0).column("key").to_pylist()))
    assert delta > keys
    task = come_back(tmp_path, log, tmp_path / "local-a", "memory")
    assert (task.full_restores, task.full_restore_reason) == (1, "delta-larger")
    assert 0 < task.restored_blocking < delta
    check_partition(layout, tmp_path / "outputs", log, 0)


@pytest.mark.spark
@pytest.mark.parametrize("bound", ["time", "size"])
def test_past_its_retention_a_returning_member_restores_in_full_and_says_why(
    spark: SparkSession, tmp_path: Path, bound: str
) -> None:
    """Out of `deltaRetention` (its mark expired) or over `deltaRetentionSize` (the oldest mark goes
    first), the changelog after its checkpoint is compacted and the mark deleted."""
    del spark
    retention = (
        replace(DEFAULT_RETENTION, seconds=0.0)
        if bound == "time"
        else replace(DEFAULT_RETENTION, max_bytes=1)
    )
    log, _ = away(tmp_path, 12, retention)
    layout = StateLayout(tmp_path / "state")
    assert "a" not in {m.member for m in changelog.read_marks(layout, 0)}
    committed_keys = len(set(log.read_arrow(0).column("key").to_pylist()))
    task = come_back(tmp_path, log, tmp_path / "local-a", "memory", epoch=3)
    assert (task.full_restores, task.full_restore_reason) == (1, "delta-expired")
    assert task.restored_blocking >= committed_keys, "every key, not a delta"
    check_partition(layout, tmp_path / "outputs", log, 0)


def test_a_checkpoint_round_trips_and_damage_is_detected() -> None:
    checkpoint = Checkpoint("lmdb", 3, Head(seq=7, offset=700, epoch=2), "h" * 64, 6, "a" * 64)
    data = checkpoint.to_json()
    assert Checkpoint.parse(data) == checkpoint
    body = json.loads(data)
    body["body"]["head"]["offset"] = 900
    for damaged in (data[:-5], json.dumps(body).encode(), b"", b"[]"):
        with pytest.raises(ValueError):
            Checkpoint.parse(damaged)


def test_two_executors_cannot_share_a_local_state_directory(tmp_path: Path) -> None:
    first = LocalState(tmp_path)
    with pytest.raises(LocalStateError, match="in use by another executor"):
        LocalState(tmp_path)
    first.close()
    LocalState(tmp_path).close()


def test_local_state_of_tasks_long_gone_is_pruned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    local = LocalState(tmp_path)
    for partition in (1, 2):
        local.directory(partition).mkdir(parents=True)
    assert local.prune({1}, idle_seconds=3600) == []
    with caplog.at_level(logging.INFO, logger="streamapp.executor.state.localstate"):
        assert local.prune({1}, idle_seconds=0) == [2]
    assert [p.name for p in tmp_path.glob("p=*")] == ["p=1"]
    # Said in the log: a task back later restores in full with no fullRestoreReason to tell why.
    assert [r.getMessage().split(",")[0] for r in caplog.records] == ["partition 2: local state deleted"]


@pytest.mark.parametrize("kind", ["memory", "lmdb"])
def test_a_store_still_held_by_a_retiring_task_is_not_pruned_under_it(tmp_path: Path, kind: str) -> None:
    """A copy dropped in the middle of a long restore still holds its store and checkpoints it when its
    unit ends: pruning must wait, or the checkpoint lands beside an emptied store that is trusted."""
    local = LocalState(tmp_path, kind)  # type: ignore[arg-type]
    store, _, _ = local.open(0)
    store.upsert(["a", "b"], [1, 2])
    assert local.prune(set(), idle_seconds=0) == [], "held: not pruned"
    local.save(store.persister(), Checkpoint(kind, 0, Head(seq=3, offset=30, epoch=1), "h", 3, "h"))  # type: ignore[arg-type]
    store.close()
    local.release(0)
    reopened, checkpoint, _ = local.open(0)
    assert checkpoint is not None and dict(reopened.items()) == {"a": 1, "b": 2}
    reopened.close()
    local.release(0)
    assert local.prune(set(), idle_seconds=0) == [0], "released: pruned"
    assert not local.directory(0).exists()


def test_an_lmdb_store_left_open_by_another_boot_is_not_trusted(tmp_path: Path) -> None:
    """Unsynced LMDB pages survive a process crash, not a machine crash or a move to another node."""
    local = LocalState(tmp_path, "lmdb")
    store, _, _ = local.open(0)
    store.upsert(["a", "b"], [1, 2])
    local.save(store.persister(), Checkpoint("lmdb", 0, Head(seq=3, offset=30, epoch=1), "h", 3, "h"))
    assert isinstance(store, LmdbStore)
    store.env.close()  # the process dies: no clean close, the open marker stays
    local.release(0)
    reopened, checkpoint, _ = local.open(0)
    assert checkpoint is not None and dict(reopened.items()) == {"a": 1, "b": 2}, "same boot: trusted"
    reopened.env.close()
    local.release(0)
    (local.directory(0) / DIRECTORY / OPEN_MARKER).write_text("another-boot")
    fresh, checkpoint, discarded = local.open(0)
    assert checkpoint is None and len(fresh) == 0 and discarded, "a fallback, counted as such"
    fresh.close()
    local.close()


def test_checkpoints_run_beside_the_manifests_and_finish_before_the_store_is_cleared(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path / "state")
    head = Head()
    for batch in range(25):
        head = commit(layout, head, {f"k{batch % 7}": batch})
    release, events = threading.Event(), []
    pool = ThreadPoolExecutor(1)

    def held(what: str, job: Callable[[], None]) -> Future[None]:
        def run() -> None:
            assert release.wait(60), "the test never released the checkpoint"
            job()
            events.append(f"{what} done")

        return pool.submit(run)

    local = LocalState(tmp_path / "local", checkpoint_every=10)
    replica = Replica(layout, 0, local, member="m", submit=held)
    assert not replica.resume()
    replica.catch_up()
    assert replica.head.seq == 24, "every manifest applied while the first checkpoint is held"
    assert replica.checkpointing is not None and not replica.checkpointing.done()
    assert not (local.directory(0) / "checkpoint.json").exists()
    forget = local.forget
    local.forget = lambda partition: (events.append("forget"), forget(partition))[1]  # type: ignore[method-assign]
    snapshots.write(layout, 0, head, "long")
    threading.Timer(0.5, release.set).start()  # still held when the restore below begins
    replica.load_snapshot()
    assert events == ["partition 0: checkpoint done", "forget"], "the checkpoint finished first"
    assert [(m.member, m.seq) for m in changelog.read_marks(layout, 0)] == [("m", 9)], (
        "at the head it was due"
    )
    pool.shutdown()


def test_an_lmdb_read_on_another_thread_holds_off_a_resize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LMDB remaps its file to grow, under any open read transaction: an expiry sweep's read must end
    first."""
    monkeypatch.setattr(lmdbstore, "INITIAL_MAP_BYTES", 1 << 20)
    store = LmdbStore(tmp_path, "long")
    store.upsert([f"k{i:05d}" for i in range(1_000)], list(range(1_000)))
    reading = store.key_source()()
    first = next(reading)
    grow = threading.Thread(target=store.upsert, args=([f"big{i:06d}" for i in range(50_000)], [1] * 50_000))
    grow.start()
    grow.join(1.0)
    assert grow.is_alive(), "the write that fills the map waits for the read"
    keys = [first, *reading]
    grow.join(60)
    assert not grow.is_alive() and len(store) == 51_000
    assert len(keys) == 1_000, "the read saw the store as it was when it began"
    store.close()


def test_the_local_state_kept_of_tasks_not_running_is_listed_newest_first(tmp_path: Path) -> None:
    """What a member reports of copies it gave up (`localCopies`): the offset each checkpoint names,
    the newest first up to the limit; not a running task's, a held one's, another store kind's or a
    torn one's."""
    local = LocalState(tmp_path, "lmdb")

    def checkpoint(partition: int, offset: int, kind: str = "lmdb", mtime: int = 0) -> None:
        local.directory(partition).mkdir(parents=True)
        marker = local.directory(partition) / CHECKPOINT
        head = Head(seq=offset // 10, offset=offset, epoch=1)
        marker.write_bytes(Checkpoint(kind, partition, head, "h", 0, "a").to_json())  # type: ignore[arg-type]
        os.utime(marker, ns=(mtime, mtime))

    checkpoint(0, 100, mtime=10**18)
    checkpoint(1, 200, mtime=2 * 10**18)
    checkpoint(2, 300, kind="memory")
    checkpoint(3, 400)
    (local.directory(3) / CHECKPOINT).write_bytes(b'{"torn')
    checkpoint(4, 500, mtime=3 * 10**18)
    local.open(4)
    checkpoint(5, 600, mtime=4 * 10**18)
    assert local.kept(running={5}, limit=10) == {1: 200, 0: 100}
    assert list(local.kept(running=set(), limit=2).items()) == [(5, 600), (1, 200)]
    checkpoint(6, 700, mtime=5 * 10**18)
    assert local.kept(running=set(), limit=1) == {6: 700}


@pytest.mark.spark
def test_an_executor_reports_the_local_state_of_a_task_it_gave_up_until_it_runs_it_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The figure the operator counts a restore on this member by (`localCopies`): the offset the
    task's checkpoint names once the task left, nothing while it runs here."""
    del spark
    log = FileLog(tmp_path / "log")
    generate(log, spec(2_000, 1))
    executor = run_member(tmp_path, log, "a", tmp_path / "local-a", "lmdb", epoch=1)
    assert executor.kept_copies(10) == {}
    executor.apply(Target())
    assert executor.kept_copies(10) == {0: 2_000}
    executor.apply(Target(active={0: 2}))
    assert executor.kept_copies(10) == {}
    stop(executor)


@pytest.mark.spark
def test_a_store_a_leaving_copy_still_holds_holds_up_only_its_own_task(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A copy that left closes its partition's store only when its last unit ends (a snapshot load
    can take minutes); the task given that partition again waits for it without a copy worker, so the
    other tasks restore and take over meanwhile. A large cluster run saw two such waits hold both
    workers, and a survivor's takeover by a delta start 78 s late."""
    del spark
    log = FileLog(tmp_path / "log")
    generate(log, GenerateSpec(partitions=3, count=3_000, keys=300, seed=4))
    owner = executor_for(tmp_path, log, "a", max_batch_records=500, snapshot_every=2)
    owner.apply(Target(active={0: 1, 1: 1, 2: 1}))
    owner.run_until_idle()
    local = LocalState(tmp_path / "local-b")
    member = executor_for(tmp_path, log, "b", local=local, copy_workers=2)
    store, _, _ = local.open(1)  # the copy of task 1 that left, still in its unit
    member.apply(Target(warmup=frozenset({0, 1, 2})))
    stepping = threading.Thread(target=lambda: [member.step_copies() for _ in range(4)], daemon=True)
    with caplog.at_level(logging.INFO, logger="streamapp.executor.task"):
        stepping.start()
        stepping.join(120)
    assert not stepping.is_alive(), "a worker waited for the held store"
    ends = {p: log.end_offset(p) for p in range(3)}
    applied = {s.partition: s.applied_offset for s in member.status()}
    assert applied == {0: ends[0], 1: 0, 2: ends[2]}, (applied, ends)
    waits = [r.getMessage() for r in caplog.records if "waiting for the copy that left" in r.getMessage()]
    assert waits == ["partition 1: waiting for the copy that left to close the local store"], "said once"
    store.close()
    local.release(1)  # its unit ended
    member.step_copies()
    assert {s.partition: s.applied_offset for s in member.status()} == ends
    stop(member)
