"""One partition on one executor in one role; the same object serves every role.

Because the role is just a field, a warmup that is promoted keeps its replica and only has to catch up the
last few manifests before it fences and processes:

* copy (standby or warmup): restore the newest snapshot once, then tail manifests in order and apply the
  segments of accepted ones; lag = owner's committed offset − applied offset.
* active: catch up, write a fence manifest with the owner epoch if the history's epoch is lower, then
  process micro-batches. A batch computes its changed rows without touching the store, writes the
  changelog segment and the outputs, and publishes its manifest; only a published manifest lets the rows
  into the store. Losing the manifest race to a higher epoch marks the task fenced: it stops processing
  and keeps following the history like a standby, so its state never holds anything uncommitted.

When a task's first batch after a takeover commits, it measures how long the task stood still: from the
previous batch manifest's commit time to its own (`resumption`), and says whether it came by a restart of
this owner, a handoff to a caught-up copy, or cold. The operator weighs restarts against handoffs by it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from streamapp import faults
from streamapp.api.member import FullRestoreReason, ResumedBy
from streamapp.api.streamapp import DEFAULT_DELTA_RETENTION_BYTES, DEFAULT_DELTA_RETENTION_SECONDS
from streamapp.executor.background import Background
from streamapp.executor.io.publisher import Publisher
from streamapp.executor.io.sink import Sink
from streamapp.executor.io.source import ReadsKeysAhead, ReportsPosition, Source
from streamapp.executor.merge import ReadAhead, fold
from streamapp.executor.pipeline import Pipeline, keyed_updates
from streamapp.executor.state import changelog, history, holds, snapshots
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.expiry import Expiry, Sweep, WindowEnds
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import LocalState
from streamapp.executor.state.manifest import Conflict, Fenced, Head, Kind, Manifest
from streamapp.executor.state.replica import HistoryGone, Replica
from streamapp.executor.state.restores import RestoreMeter
from streamapp.executor.state.retention import Retention
from streamapp.executor.state.stores import rows_table

log = logging.getLogger(__name__)


class Role(StrEnum):
    ACTIVE = "active"
    STANDBY = "standby"
    WARMUP = "warmup"


# What a checkpoint keeps when the spec says nothing (`stateStore.deltaRetention`, `deltaRetentionSize`).
DEFAULT_RETENTION = Retention(DEFAULT_DELTA_RETENTION_SECONDS, DEFAULT_DELTA_RETENTION_BYTES)
RESTORE_AGAIN_SECONDS = 10.0
"""How long a copy whose history was gone under it waits before it restores again: the owner publishes
a newer snapshot within its snapshot interval, and a store that lost everything is not read in a loop."""


@dataclass(frozen=True)
class TaskConfig:
    """Knobs of the data plane.

    `max_batch_records` bounds a micro-batch (and so how long a revocation waits for the batch in
    flight); `snapshot_every` is the number of batches between snapshots, which bounds restore time;
    `max_apply_per_step` bounds the manifests a copy applies per step so lag is reported during a long
    catch-up; `keep_snapshots` older snapshots stay for copies that are reading one; `retention` is
    how long (and up to how many bytes) the changelog after a member's local checkpoint is kept, and so
    also how long a task's local state stays on this member after the task left it (Kafka Streams'
    `state.cleanup.delay.ms`), in case it comes back. `shared_batches` runs the due partitions'
    micro-batches as one Spark job (`batches.run_round`); `copy_workers` threads restore and tail
    copies beside the batches (`Executor.run`), so a long restore holds one.
    """

    max_batch_records: int = 100_000
    snapshot_every: int = 20
    max_apply_per_step: int = 50
    keep_snapshots: int = 2
    owner: str = ""
    retention: Retention = DEFAULT_RETENTION
    shared_batches: bool = True
    copy_workers: int = 2


@dataclass(frozen=True)
class TaskContext:
    """What every task of an executor shares; `started_at` is when this executor process began (wall
    clock): a batch of its owner committed before then was committed by an earlier process; `restores`
    times every restore of its copies (the executor's restore rate)."""

    layout: StateLayout
    source: Source
    sink: Sink
    pipeline: Pipeline
    spark: Callable[[], SparkSession]
    config: TaskConfig
    local: LocalState | None = None
    started_at: float = field(default_factory=time.time)
    restores: RestoreMeter = field(default_factory=RestoreMeter)
    background: Background = field(default_factory=Background)


@dataclass(frozen=True)
class SnapshotWritten:
    """A snapshot the background thread published: at `seq`, of `rows` keys; `rows_before` is what the
    replica counted as its cold rows when the copy was taken."""

    seq: int
    rows: int
    rows_before: int


@dataclass(frozen=True)
class Resumption:
    """How long a task stood still when its ownership on this executor began, and how it came here."""

    seconds: float
    by: ResumedBy


def resumption(
    previous: Manifest | None, first: Manifest, owner: str, started_at: float, warm: bool
) -> Resumption | None:
    """The stand-still of a task whose first batch after a takeover is `first`: from `previous`, the
    newest batch manifest before it (the history it caught up on), to `first`, by their commit times;
    `owner` is this executor's (`TaskConfig.owner`), `started_at` when its process began; pure. None
    when there is no earlier batch (a fresh partition) or one from before commit times were recorded.

    Both times come from the manifests, whoever wrote them, so the figure covers everything between
    the two commits — the old owner letting go or its pod dying, the operator's reassignment, a pod
    and Spark starting, the restore, the first batch — and nothing the executor would have to
    remember across its own death. `restart`: the previous batch is this owner's (the pod name, the
    same across restarts) from an earlier process; `handoff`: another owner's (or this process's own,
    taken back) and the task was a `warm` copy here (a warmup or standby that had restored its state)
    when it was made active — applying the old owner's last batch at the takeover does not make it
    cold; `cold` otherwise.
    """
    if previous is None or previous.committed_at is None or first.committed_at is None:
        return None
    seconds = max(0.0, first.committed_at - previous.committed_at)
    if previous.owner == owner and previous.committed_at < started_at:
        return Resumption(seconds, "restart")
    return Resumption(seconds, "handoff" if warm else "cold")


@dataclass(frozen=True)
class TaskStatus:
    """What the executor reports for one partition.

    `epoch` is the owner epoch this task holds (active) or the newest epoch it has applied (copies);
    `committed_offset` is the owner's committed input offset as last seen; `lag` = committed − applied
    (0 for an owning active); `backlog` is unprocessed input behind an active task; `fenced_by` is set
    when the store holds a higher epoch than this active task's: it lost a commit race to one, or has
    not taken over yet and will. `store_epoch` is the highest epoch this executor has seen in the store
    for the partition, in any role: the operator hands out no epoch at or below it, so an app re-created
    on an old store resumes above the store's epochs instead of being fenced. `input_lag` is what
    autoscalers read: source end offset − committed offset for an active task, also while it restores
    or fences before owning (its input waits all the same); None for copies and for a fenced task, which
    process no input. `restored_blocking` / `restored_background` count the rows restored from the
    shared store while active / as a copy (see `Replica`). `resumed` is how the current (or last)
    ownership of the task on this executor began (see `resumption`), kept while the task stays here.
    `restore_rows`, for an owning active task, is how many rows a copy with no local state would
    restore now (`Replica.cold_rows`): what the operator estimates a restore elsewhere by.
    `full_restores` / `full_restore_reason`: how often, and why last, a copy here that had local state
    restored in full anyway (`Replica._fell_back`). `committed_records` counts the input records this
    task committed on this executor, `last_commit_at` is when its last batch committed (wall clock).
    """

    partition: int
    role: Role
    epoch: int
    applied_seq: int
    applied_offset: int
    committed_offset: int
    lag: int
    backlog: int
    keys: int
    fenced_by: int | None
    input_lag: int | None = None
    store_epoch: int = 0
    restored_blocking: int = 0
    restored_background: int = 0
    resumed: Resumption | None = None
    restore_rows: int | None = None
    full_restores: int = 0
    full_restore_reason: FullRestoreReason | None = None
    committed_records: int = 0
    last_commit_at: float | None = None


class Task:
    """One partition in one role (see the module docstring)."""

    def __init__(self, partition: int, context: TaskContext) -> None:
        self.partition = partition
        self.ctx = context
        self.replica = Replica(
            context.layout,
            partition,
            context.local,
            context.restores,
            context.config.owner,
            submit=context.background.submit,
        )
        self.role = Role.STANDBY
        self.epoch = 0
        self.owning = False
        self.fenced_by: int | None = None
        self.restored = False
        self.store_wait_said = False  # `step` logs a wait for a held store once
        self.committed_offset = 0
        self.backlog = 0
        self.committed_records = 0
        self.last_commit_at: float | None = None
        self.batches_since_snapshot = 0
        self.snapshotting: Future[SnapshotWritten] | None = None
        self.swept_through = -1
        self.expiry: Expiry | None = None  # the owner's watermark, set up at takeover
        self.expiring: Future[Sweep] | None = None
        # When the takeover finished, until the first batch after it commits (both are logged, so a
        # handoff's stand-still can be split into takeover, waiting for a round, and the first batch).
        self.took_over_at: float | None = None
        # The newest batch manifest when the takeover finished, until that first batch measures the
        # stand-still from it (`resumed`).
        self.previous_batch: Manifest | None = None
        self.resumed: Resumption | None = None
        # Whether the task was a restored copy here (warmup, standby) when it was last made active, and
        # when that was: the batch lane gives takeovers made together a moment to join one round.
        self.came_warm = False
        self.activated_at: float | None = None
        # When a copy whose history was gone restores again (monotonic; see `step`).
        self.restore_again_at = float("-inf")

    @property
    def head(self) -> Head:
        return self.replica.head

    def assign(self, role: Role, epoch: int = 0) -> None:
        """Change role between batches; a new active epoch requires a fresh takeover."""
        self.replica.blocking = role is Role.ACTIVE
        if role is not Role.ACTIVE or epoch != self.epoch:
            self._cancel_snapshot()
        if role is not Role.ACTIVE:
            self.owning = False
            self.epoch = 0
        elif epoch != self.epoch:
            self.came_warm = self.role is not Role.ACTIVE and self.restored
            self.activated_at = time.monotonic()
            self.owning = False
            self.fenced_by = None
            self.epoch = epoch
        self.role = role

    def step(self) -> int:
        """Do one unit of work for the current role; returns keys restored + manifests applied + records.

        A batch that lost its manifest race to an equal epoch (a second incarnation of this owner) is
        dropped and the winner's commit applied instead; the next step retries from there. A copy whose
        history is gone (`HistoryGone`) restores again from its next step on.
        """
        if time.monotonic() < self.restore_again_at:
            return 0
        if not self.restored and self.replica.store_busy():
            # A copy of this partition that left is still in its last unit (a snapshot load can take
            # minutes) and closes the store when it ends. Waiting for it here would hold a copy worker:
            # with two tasks so held, every other task's restore and takeover stood still behind them
            # (a large cluster run: a survivor's takeover by a delta started 78 s late). Next unit.
            if not self.store_wait_said:
                log.info(
                    "partition %d: waiting for the copy that left to close the local store", self.partition
                )
                self.store_wait_said = True
            return 0
        try:
            done = self.restore()
            if self.role is Role.ACTIVE and self.fenced_by is None:
                return done + self.racing(self.process_batch if self.owning else self.take_over)
            return done + self.tail()
        except HistoryGone as gone:
            if self.owning:
                raise
            # A copy or a takeover whose restore found no snapshot to start from (one the owner pruned
            # as it read): the replica starts over at its next catch-up; the member's other tasks go on.
            log.warning("%s; restoring again from the newest snapshot in %.0f s", gone, RESTORE_AGAIN_SECONDS)
            self.restore_again_at = time.monotonic() + RESTORE_AGAIN_SECONDS
            return 0

    def racing(self, work: Callable[[], int]) -> int:
        """Run work that publishes manifests; a lost race is settled: after an equal epoch's win the
        task applies the winner's commit, after a higher epoch's it is fenced and tails from then on."""
        try:
            return work()
        except (Conflict, Fenced) as race:
            return self.lost(race)

    def lost(self, race: Conflict | Fenced) -> int:
        """Settle a lost manifest race (see `racing`); returns the manifests applied."""
        if isinstance(race, Conflict):
            return self.replica.catch_up()
        self.fenced_by = race.theirs
        self.owning = False
        self._cancel_snapshot()
        return self.tail()

    def _cancel_snapshot(self) -> None:
        """A task no longer owned under this epoch publishes no snapshot still queued: its new owner
        does. One already running finishes; what it writes cannot replace the new owner's
        (`snapshots.publish`) nor move the floor back (`history.prune`)."""
        if self.snapshotting is not None and self.snapshotting.cancel():
            self.snapshotting = None

    def restore(self) -> int:
        """The first time the task runs: resume from the member's local state when its checkpoint is
        trusted, else load the newest snapshot; returns the keys loaded (1 for a resume, as work done).
        """
        if self.restored:
            return 0
        self.restored = True
        if self.replica.resume():
            # The newest snapshot's writer swept everything before it; later decided sequences are
            # swept again at takeover.
            self.swept_through = min(self.head.seq, snapshots.newest_seq(self.ctx.layout, self.partition))
            return 1
        loaded = self.replica.load_snapshot()
        self.swept_through = self.head.seq  # the snapshot's writer swept everything before it
        return loaded

    def close(self) -> None:
        """The task leaves this executor: checkpoint its local store so a return resumes from it."""
        self.replica.close()

    def tail(self) -> int:
        """Copy step: apply a bounded number of new manifests and refresh the owner's committed offset."""
        applied = self.replica.catch_up(self.ctx.config.max_apply_per_step)
        self.committed_offset = self.replica.owner_offset()
        return applied

    def take_over(self) -> int:
        """Become the owner at `self.epoch`: catch up fully, then fence older epochs out of the history.

        Returns the manifests applied plus one for the takeover itself, so a step that only took over
        still counts as work done.
        """
        began = time.monotonic()
        applied = self.replica.catch_up()
        while self.head.epoch < self.epoch:
            fence = Manifest(
                seq=self.head.next_seq,
                epoch=self.epoch,
                kind=Kind.FENCE,
                start=self.head.offset,
                end=self.head.offset,
                owner=self.ctx.config.owner,
                committed_at=time.time(),
            )
            try:
                manifests.create(self.ctx.layout, self.partition, fence)
            except Conflict:
                applied += self.replica.catch_up()
                continue
            self.replica.apply(fence)
        if self.head.epoch > self.epoch:
            raise Fenced(self.partition, self.epoch, self.head.epoch)
        self.sweep()
        self.expiry, self.expiring = self.ctx.pipeline.expiry(), None  # a sweep of an earlier term is dropped
        if self.expiry is not None:
            self._pick_up_watermark(self.expiry)
        self.owning = True
        self.previous_batch = self.replica.newest_batch()
        self.resumed = None
        self.committed_offset = self.head.offset
        self.backlog = max(0, self.ctx.source.end_offset(self.partition) - self.head.offset)
        self.took_over_at = time.monotonic()
        log.info(
            "partition %d taken over at epoch %d in %.1f s (%d manifests applied, %d records waiting)",
            self.partition,
            self.epoch,
            self.took_over_at - began,
            applied,
            self.backlog,
        )
        return applied + 1

    @property
    def taking_over(self) -> bool:
        """Made active and not owning yet: its takeover (catch up, fence) is due on the copy lane."""
        return self.role is Role.ACTIVE and not self.owning and self.fenced_by is None

    @property
    def due(self) -> bool:
        """Whether the next unit of work is a micro-batch (an owning, unfenced active task)."""
        return self.role is Role.ACTIVE and self.owning and self.fenced_by is None

    def process_batch(self) -> int:
        """Run one micro-batch over `[committed, end)` as its own Spark job and commit it; returns
        records consumed. (The executor runs all due partitions' batches together: `batches`.)"""
        span = self.next_batch()
        if span is None:
            return 0
        batch = self.ctx.source.read(self.ctx.spark(), self.partition, *span)
        return self.commit_batch(span, keyed_updates(self.ctx.pipeline, batch))

    def next_batch(self) -> tuple[int, int] | None:
        """The input range `[committed, end)` of the next micro-batch, or None when there is no input.

        Catching up first lets a zombie notice a fence before spending a batch's work (raises Fenced);
        the manifest race in `_commit` is what guarantees it.
        """
        if self.replica.catch_up() and self.head.epoch > self.epoch:
            raise Fenced(self.partition, self.epoch, self.head.epoch)
        self._publish()
        start = self.head.offset
        end = min(self.ctx.source.end_offset(self.partition), start + self.ctx.config.max_batch_records)
        self.backlog = max(0, end - start)
        return (start, end) if end > start else None

    def read_ahead(self, span: tuple[int, int], readers: Executor) -> Future[Mapping[str, Any]] | None:
        """The stored values of the keys of the batch's input, looked up on `readers` while Spark
        transforms the batch; None when that does not pay or cannot be known.

        Why: with a store larger than its pod's memory, the lookups of a batch's keys wait for the disk
        (`LmdbStore.lookup`), and the batch lane used to wait for them after Spark's job. A pipeline
        whose updates are keyed by its input's keys (`keys_from_input`) tells them before the job, and
        the store is only written by this lane after the fold, so the values read now are the ones
        the fold needs.
        """
        source, state = self.ctx.source, self.replica.state
        if not (
            self.ctx.pipeline.keys_from_input and state.reads_ahead and isinstance(source, ReadsKeysAhead)
        ):
            return None
        keys = source.keys_in_process(self.partition, *span)
        return readers.submit(state.lookup, keys)

    def commit_batch(
        self, span: tuple[int, int], updates: pa.Table, known: Future[Mapping[str, Any]] | None = None
    ) -> int:
        """Fold the batch's combined updates into new values, commit them, then let them into the store;
        returns records consumed. Raises Conflict or Fenced when the manifest race is lost. `known` is
        what `read_ahead` looked up for this batch."""
        start, end = span
        faults.reached("batch.transformed")
        keys = updates.column("key").to_pylist()
        state = self.replica.state
        changed = fold(
            ReadAhead(known.result(), state) if known is not None else state.lookup(keys),
            keys,
            updates.column("value").to_pylist(),
            self.ctx.pipeline.merge,
        )
        after = None
        if self.expiry is not None:
            changed = self._with_expired(self.expiry, self.expiry.admit(changed))
            after = self._observed(self.expiry, changed)
        committed = self._commit(start, end, changed, after.ends() if after is not None else None)
        self.committed_records += end - start
        self.last_commit_at = committed.committed_at
        self.replica.apply_own(committed, changed)
        if self.took_over_at is not None:
            self._first_committed(committed, end - start, self.took_over_at)
        if after is not None:
            self.expiry = after
        self._publish()
        if isinstance(self.ctx.source, ReportsPosition):
            self.ctx.source.report_position(self.partition, self.head.offset)
        self.committed_offset = self.head.offset
        self.backlog = max(0, self.ctx.source.end_offset(self.partition) - self.head.offset)
        self.batches_since_snapshot += 1
        self._snapshot_when_due()
        return end - start

    def _pick_up_watermark(self, expiry: Expiry) -> None:
        """The bounds the last accepted batch recorded, or (when the history does not say) a scan of
        the store, on the takeover's path."""
        if self.replica.windows is not None:
            expiry.resume(self.replica.windows)
            return
        began = time.monotonic()
        expiry.observe(key for key, _ in self.replica.state.items())
        log.info(
            "partition %d: window bounds not in the history; scanned %d keys in %.1f s",
            self.partition,
            len(self.replica.state),
            time.monotonic() - began,
        )

    def _with_expired(self, expiry: Expiry, changed: dict[str, Any]) -> dict[str, Any]:
        """`changed` plus tombstones for the windows a finished sweep found expired; starts the next
        sweep beside the batches when one is due (`expiry`)."""
        if self.expiring is not None and self.expiring.done():
            found, self.expiring = self.expiring.result(), None
            expiry.settle(found)
            state = self.replica.state
            gone = {key: None for key in found.expired if key not in changed and state.get(key) is not None}
            changed = {**changed, **gone}
        if self.expiring is None and expiry.due():
            watermark, keys = expiry.start_sweep(), self.replica.state.key_source()
            self.expiring = self.ctx.background.submit(
                f"partition {self.partition}: expiry sweep", lambda: expiry.sweep(keys(), watermark)
            )
        return changed

    def _snapshot_when_due(self) -> None:
        """Every `snapshot_every` batches, start a snapshot beside the batches; one at a time per task,
        so one still running when the next is due delays that one (a failed one raises here)."""
        if self.snapshotting is not None:
            if not self.snapshotting.done():
                return
            written, self.snapshotting = self.snapshotting.result(), None
            self.swept_through = max(self.swept_through, written.seq)
            self.replica.cold_rows += written.rows - written.rows_before
        if self.batches_since_snapshot >= self.ctx.config.snapshot_every:
            self.snapshot()

    def _first_committed(self, committed: Manifest, records: int, took_over_at: float) -> None:
        """The first batch after the takeover is in: measure how long the task stood still."""
        self.resumed = resumption(
            self.previous_batch,
            committed,
            self.ctx.config.owner,
            self.ctx.started_at,
            self.came_warm,
        )
        log.info(
            "partition %d: first batch at epoch %d (%d records) committed %.1f s after the takeover; %s",
            self.partition,
            self.epoch,
            records,
            time.monotonic() - took_over_at,
            f"resumed by {self.resumed.by} after {self.resumed.seconds:.1f} s"
            if self.resumed is not None
            else "no earlier batch to measure from",
        )
        self.took_over_at = None
        self.previous_batch = None

    @staticmethod
    def _observed(expiry: Expiry, changed: dict[str, Any]) -> Expiry:
        """The tracker once the batch is in: a copy (its fields are plain numbers), whose bounds go into
        the batch's manifest and which replaces the task's only after the commit succeeds (a lost race
        must not move the watermark)."""
        after = replace(expiry)
        after.observe(key for key, value in changed.items() if value is not None)
        return after

    def _commit(self, start: int, end: int, changed: dict[str, Any], windows: WindowEnds | None) -> Manifest:
        seq = self.head.next_seq
        rows = rows_table(changed, self.ctx.pipeline.value_type)
        segment = changelog.write_segment(self.ctx.layout, self.partition, seq, self.epoch, rows)
        faults.reached("batch.segment-written")
        outputs = self.ctx.sink.write(self.partition, seq, self.epoch, rows)
        faults.reached("batch.outputs-written")
        committed = Manifest(
            seq=seq,
            epoch=self.epoch,
            kind=Kind.BATCH,
            start=start,
            end=end,
            segments=(segment,),
            outputs=outputs,
            owner=self.ctx.config.owner,
            committed_at=time.time(),
            windows=windows,
        )
        try:
            manifests.create(self.ctx.layout, self.partition, committed)
        except (Conflict, Fenced):
            self._settle([manifests.read(self.ctx.layout, self.partition, seq)])  # our files lost
            raise
        faults.reached("batch.committed")
        return committed

    def _publish(self) -> None:
        """Let a publishing sink (Kafka) publish what is committed: right after each commit, and before
        each batch so a new owner first republishes what its predecessor committed but never published."""
        if isinstance(self.ctx.sink, Publisher):
            self.ctx.sink.publish(self.partition, self.epoch, self.head)

    def sweep(self) -> None:
        """Remove the files of attempts that lost or died at every sequence decided since the last
        sweep. It runs when the task is taken over, and with each snapshot (`_write_snapshot`, on the
        background thread) — not per batch, since it lists directories that grow with the history;
        whatever a crash interrupts, the next takeover sweeps again from the newest snapshot."""
        self._sweep_between(self.swept_through, self.head.seq)
        self.swept_through = self.head.seq

    def _sweep_between(self, swept: int, through: int) -> None:
        """Settle every sequence in `(swept, through]` (see `sweep`)."""
        decided = range(swept + 1, through + 1)
        self._settle([manifests.read(self.ctx.layout, self.partition, seq) for seq in decided])

    def _settle(self, decided: Sequence[Manifest | None]) -> None:
        found = [m for m in decided if m is not None]
        changelog.settle(self.ctx.layout, self.partition, {m.seq: m.segments for m in found})
        self.ctx.sink.settle(self.partition, {m.seq: m.outputs for m in found})

    def snapshot(self) -> None:
        """Start publishing the state at the head on the background thread (`_write_snapshot`). The lane
        hands over only the head: the snapshot is built from the shared store (`snapshots.write`)."""
        head, swept, rows_before = self.head, self.swept_through, self.replica.cold_rows
        self.batches_since_snapshot = 0
        work = partial(self._write_snapshot, head, swept, rows_before)
        self.snapshotting = self.ctx.background.submit(f"partition {self.partition}: snapshot", work)

    def _write_snapshot(self, head: Head, swept: int, rows_before: int) -> SnapshotWritten:
        """Off the batch lane: remove the losers of the sequences decided since the last sweep, publish
        the state at `head`, then drop the snapshots, runs, segments and manifests newer ones cover. Touches only
        the shared store (the lane collects the result)."""
        self._sweep_between(swept, head.seq)
        layout, partition, config = self.ctx.layout, self.partition, self.ctx.config
        written = snapshots.write(layout, partition, head, self.ctx.pipeline.value_type)
        faults.reached("snapshot.written")
        held = holds.held(layout, partition, time.time())
        covered = snapshots.prune(layout, partition, config.keep_snapshots, held)
        changelog.compact(layout, partition, covered, config.retention, time.time())
        history.prune(layout, partition, history.readers_start(layout, partition, covered))
        return SnapshotWritten(head.seq, written.rows, rows_before)

    def status(self) -> TaskStatus:
        """Current progress; a copy re-reads the owner's position so even a never-stepped one reports lag."""
        if not self.owning:
            self.committed_offset = self.replica.owner_offset()
        committed = max(self.committed_offset, self.head.offset)
        store_epoch = self._store_epoch()
        fenced_by = self.fenced_by
        if fenced_by is None and self.role is Role.ACTIVE and self.epoch < store_epoch:
            fenced_by = store_epoch
        return TaskStatus(
            partition=self.partition,
            role=self.role,
            epoch=self.epoch if self.role is Role.ACTIVE else self.head.epoch,
            applied_seq=self.head.seq,
            applied_offset=self.head.offset,
            committed_offset=committed,
            lag=0 if self.owning else manifests.lag(self.committed_offset, self.head),
            backlog=self.backlog if self.owning else 0,
            keys=len(self.replica.state),
            fenced_by=fenced_by,
            input_lag=self._input_lag(committed),
            store_epoch=store_epoch,
            restored_blocking=self.replica.restored_blocking,
            restored_background=self.replica.restored_background,
            resumed=self.resumed,
            restore_rows=self.replica.cold_rows if self.owning else None,
            full_restores=self.replica.full_restores,
            full_restore_reason=self.replica.full_restore_reason,
            committed_records=self.committed_records,
            last_commit_at=self.last_commit_at,
        )

    def _store_epoch(self) -> int:
        """The highest epoch seen in the store: accepted up to the head, lost to, or newest written."""
        newest = manifests.newest(self.ctx.layout, self.partition, self.head.seq)
        return max(self.head.epoch, self.fenced_by or 0, newest.epoch if newest is not None else 0)

    def _input_lag(self, committed: int) -> int | None:
        """The owner keeps `backlog` current at every batch; a task still taking over asks the source."""
        if self.role is not Role.ACTIVE or self.fenced_by is not None:
            return None
        if self.owning:
            return self.backlog
        return max(0, self.ctx.source.end_offset(self.partition) - committed)
