"""A partition's state rebuilt from its committed history: the newest snapshot plus accepted manifests.

Every reader of state goes through this: standbys and warmups tailing an owner, a new owner restoring
before it fences, and tools that check a partition. It needs neither Spark nor the source, only the state
path, and it only ever applies segments named by accepted manifests.

On a member, a replica also keeps its store on the member's volume (`localstate`): it resumes from a
trusted local checkpoint and replays only the manifests after it, and checkpoints as it goes. It counts
the rows it restores from the shared store — while its task is active (blocking: the task cannot
process until they are in) or a copy (in the background) — so a member can report what a restart cost,
and times them into the executor's `RestoreMeter`. It also keeps how many rows a copy with no local
state would restore now (`cold_rows`: the newest snapshot's rows plus every segment row after it), which
its task reports as owner: the size side of a lost task's restore estimate.

A member reading a snapshot holds it (`holds`) until it has replayed the history after it, so the
owner's pruning cannot delete it part way however slow the read. Each local checkpoint is also marked
in the shared store under the member's name (`retention`), so compaction keeps the changelog after it;
a copy that had local state but must restore in full anyway counts it with its reason
(`full_restores`, the executor's `RestoreMeter`): never a silent fallback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any, Literal

from streamapp import faults
from streamapp.executor.state import changelog, holds, snapshots
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.expiry import WindowEnds
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import Checkpoint, LocalState, digest
from streamapp.executor.state.manifest import Head, Kind, Manifest
from streamapp.executor.state.prefetch import Prefetch, Segments
from streamapp.executor.state.restores import RestoreMeter
from streamapp.executor.state.retention import Mark
from streamapp.executor.state.runs import CorruptRun
from streamapp.executor.state.stores import KeyedStore, MemoryStore

# Why a copy that had local state of its task restored it in full anyway: its checkpoint could not be
# read, the shared history no longer holds what it names, or the changelog after it was compacted away.
# A member's report carries it (`api.member.FullRestoreReason` spells the same values).
FullRestoreReason = Literal["checkpoint-unusable", "history-changed", "delta-expired", "delta-larger"]

log = logging.getLogger(__name__)
FLOOR_CHECK_SECONDS = 30.0
LOAD_PASSES = 3
"""Passes over the snapshots a restore makes when one was deleted while it read it (see `holds`)."""
Submit = Callable[[str, Callable[[], None]], Future[None]]
"""Runs named work on a background thread (`executor.background.Background.submit`)."""


class HistoryGone(RuntimeError):
    """The manifests after the replica's head are gone and no snapshot covers them. The replica is
    left empty at the start of the history, so its next catch-up restores from the newest snapshot
    again (a copy's `Task` retries so, without stopping the member)."""


class Replica:
    """State and history position of one partition on one executor.

    Without `local` the state lives in memory only (tools, tests); with it, `resume` opens the
    partition's local store and `close` checkpoints it. `meter` (the executor's) times its restores.
    `submit` (the executor's background thread) takes the periodic checkpoints off the thread applying
    manifests — the batch lane, for an active task; without it they run in line.
    """

    def __init__(
        self,
        layout: StateLayout,
        partition: int,
        local: LocalState | None = None,
        meter: RestoreMeter | None = None,
        member: str = "",
        submit: Submit | None = None,
    ) -> None:
        self.layout = layout
        self.partition = partition
        self.local = local
        self.meter = meter or RestoreMeter()
        # Whose local checkpoints these are: each is marked in the shared store under this name, so
        # compaction keeps the changelog after it (`retention`); none without a name (tools, tests).
        self.member = member
        # Times this copy had local state but restored in full anyway, and why the last time.
        self.full_restores = 0
        self.full_restore_reason: FullRestoreReason | None = None
        # Rows a copy with no local state would restore to reach the head; counted from the snapshot
        # loaded (or the keys of a store resumed from its checkpoint) and every segment applied since.
        self.cold_rows = 0
        self.state: KeyedStore = MemoryStore()
        self.head = Head()
        # A windowed pipeline's bounds as the last accepted batch recorded them; None when unknown (the
        # head came from a snapshot or a checkpoint and no batch was applied since).
        self.windows: WindowEnds | None = None
        self.blocking = False
        self.restored_blocking = 0
        self.restored_background = 0
        self.since_checkpoint = 0
        self.opened = False
        self.submit = submit
        self.checkpointing: Future[None] | None = None
        self.floor_checked_at = float("-inf")
        # The snapshot sequence this replica holds while it restores from it (`holds`), and when the
        # hold was last renewed (monotonic).
        self.holding: int | None = None
        self.hold_renewed = float("-inf")

    def resume(self) -> bool:
        """Open the local store; True when its checkpoint is trusted and the head moved to it.

        An untrusted checkpoint (see `localstate`) is forgotten and the store cleared, so the caller
        restores in full.
        """
        if self.local is None:
            return False
        self.state, found, discarded = self.local.open(self.partition)
        self.opened = True
        if found is not None and self._trusted(found):
            if not self._delta_larger(found.head):
                self.head, self.windows = found.head, None
                self.cold_rows = len(self.state)
                return True
            self._fell_back("delta-larger")
        elif discarded:
            self._fell_back("checkpoint-unusable")
        elif found is not None:
            pruned = max(found.anchor_seq, 0) <= manifests.floor(self.layout, self.partition).seq
            self._fell_back("delta-expired" if pruned else "history-changed")
        self.local.forget(self.partition)
        self.state.clear()
        return False

    def store_busy(self) -> bool:
        """Whether `resume` would wait for another copy of the partition on this executor, one that
        left, to close the local store: it holds it until its unit ends (`LocalState.open`)."""
        return self.local is not None and not self.opened and self.local.held(self.partition)

    def _delta_larger(self, checkpoint: Head) -> bool:
        """Whether replaying the changelog after `checkpoint` reads more bytes than a full restore: the
        newest snapshot's runs and the changelog after it. A member away for long while the task was
        busy can have more to replay than the state holds (each batch's segment repeats hot keys).
        One listing of the changelog's sizes and one snapshot descriptor decide it."""
        sizes: dict[int, int] = {}
        for name, size in self.layout.store.sizes(self.layout.changelog(self.partition)).items():
            if name.endswith(changelog.SUFFIX) and name[:1].isdigit():  # a segment, not a stray file
                seq = changelog.file_seq(name)
                sizes[seq] = sizes.get(seq, 0) + size
        newest = snapshots.newest_trusted(self.layout, self.partition)
        if newest is None or newest.head.seq <= checkpoint.seq:
            return False  # a full restore would replay all the delta and more
        delta = sum(size for seq, size in sizes.items() if seq > checkpoint.seq)
        full = newest.size + sum(size for seq, size in sizes.items() if seq > newest.head.seq)
        return delta > full

    def _fell_back(self, reason: FullRestoreReason) -> None:
        """Local state was here but cannot be used: the restore about to happen is a full one."""
        self.full_restores += 1
        self.full_restore_reason = reason
        self.meter.fell_back(reason)

    def _trusted(self, checkpoint: Checkpoint) -> bool:
        """The shared history still holds the manifests the checkpoint names, unchanged."""
        for seq, expected in (
            (checkpoint.head.seq, checkpoint.head_digest),
            (checkpoint.anchor_seq, checkpoint.anchor_digest),
        ):
            if seq < 0:
                continue
            found = manifests.read(self.layout, self.partition, seq)
            if found is None or digest(found) != expected:
                return False
        return True

    def checkpoint(self) -> None:
        """Persist the local store and record the head it reflects, now (nothing without local state)."""
        self.settle_checkpoint()
        job = self._checkpoint_job()
        if job is not None:
            job()

    def _checkpoint_soon(self) -> None:
        """A periodic checkpoint: on the background thread when there is one, else now. One at a time: a
        checkpoint still running when the next is due delays it to the next manifest."""
        if self.submit is None:
            self.checkpoint()
        elif self.checkpointing is None or self.checkpointing.done():
            self.settle_checkpoint()
            job = self._checkpoint_job()
            if job is not None:
                self.checkpointing = self.submit(f"partition {self.partition}: checkpoint", job)

    def settle_checkpoint(self) -> None:
        """Wait for a checkpoint running in the background: before the store is cleared, replaced or
        closed, so no checkpoint can land next to a store it does not describe. A failed one is only
        logged (by the background thread): the next checkpoint is due soon."""
        running, self.checkpointing = self.checkpointing, None
        if running is not None:
            wait([running])

    def _checkpoint_job(self) -> Callable[[], None] | None:
        """Take what must be taken at this head (the head itself, and what the store must copy now) and
        return the rest of the checkpoint: reading the manifests it names, persisting the store,
        publishing the checkpoint file and the mark."""
        if self.local is None or not self.opened or self.head.seq < 0:
            return None
        local, at, persist = self.local, self.head, self.state.persister()
        self.since_checkpoint = 0

        def finish() -> None:
            head = manifests.read(self.layout, self.partition, at.seq)
            if head is None:
                return
            anchor = manifests.anchor(self.layout, self.partition, head)
            checkpoint = Checkpoint(
                store=local.kind,
                partition=self.partition,
                head=at,
                head_digest=digest(head),
                anchor_seq=anchor.seq if anchor is not None else -1,
                anchor_digest=digest(anchor) if anchor is not None else "",
            )
            local.save(persist, checkpoint)
            if self.member:
                changelog.write_mark(self.layout, self.partition, Mark(self.member, at.seq, time.time()))

        return finish

    def newest_batch(self) -> Manifest | None:
        """The newest batch manifest at or before the head: the last commit that consumed input (a
        fence consumes none, so it says nothing about when the task last processed)."""
        head = manifests.read(self.layout, self.partition, self.head.seq) if self.head.seq >= 0 else None
        return manifests.anchor(self.layout, self.partition, head) if head is not None else None

    def close(self) -> None:
        """Checkpoint and release the local store (the task left this member or the member stops), and
        the snapshot it held."""
        self.release_hold()
        if self.opened and self.local is not None:
            self.checkpoint()
            self.state.close()
            self.opened = False
            self.local.release(self.partition)

    def _restored(self, rows: int) -> None:
        if self.blocking:
            self.restored_blocking += rows
        else:
            self.restored_background += rows

    def _applied(self) -> None:
        """Count a manifest into the local checkpoint interval."""
        self.since_checkpoint += 1
        if self.local is not None and self.since_checkpoint >= self.local.checkpoint_every:
            self._checkpoint_soon()

    def load_snapshot(self) -> int:
        """Start from the newest trustworthy snapshot; returns the rows loaded (0 if none).

        A snapshot is trusted when manifest `seq` still exists with the snapshot's epoch and offset
        (`snapshots.trusted`). The member holds it while reading (`holds`). One with a run that fails
        its checksum is skipped for the next older one, and what it applied is cleared; when one was
        deleted part way anyway (pruned before the hold was seen), the pass starts again from the
        newest, which the owner's next prune keeps.
        """
        for _ in range(LOAD_PASSES):
            loaded, pruned_under = self._load_newest()
            if loaded is not None:
                return loaded
            if not pruned_under:
                break
        self.release_hold()
        return 0

    def _load_newest(self) -> tuple[int | None, bool]:
        """One pass over the snapshots, newest first: the rows loaded from the first that restores
        (None when none did), and whether one was deleted while it was read."""
        pruned_under = False
        for name in snapshots.newest_first(self.layout, self.partition):
            try:
                found = snapshots.read(self.layout, name)
            except FileNotFoundError:
                continue
            if not snapshots.trusted(self.layout, self.partition, found):
                continue
            self._hold(found.head.seq)
            self.settle_checkpoint()
            if self.local is not None and self.opened:
                self.local.forget(self.partition)
            self.state.clear()
            loaded = 0
            try:
                with self.meter.timing() as timed:
                    for table in snapshots.tables(self.layout, found):
                        rows = self.state.apply_table(table)
                        timed.append(rows)
                        loaded += rows
                        self._renew_hold()
            except (FileNotFoundError, CorruptRun) as error:
                log.warning("partition %d: snapshot %s not restored (%s)", self.partition, name, error)
                self.state.clear()
                pruned_under = pruned_under or isinstance(error, FileNotFoundError)
                continue
            self._restored(loaded)
            self.cold_rows = loaded
            self.head, self.windows = found.head, None
            return loaded, False
        return None, pruned_under

    def _hold(self, seq: int) -> None:
        """Hold the snapshot after commit `seq` against pruning (none without a member name: tools)."""
        if self.member:
            holds.write(self.layout, self.partition, holds.Hold(self.member, seq, time.time()))
            self.holding, self.hold_renewed = seq, time.monotonic()

    def _renew_hold(self) -> None:
        if self.holding is not None and time.monotonic() - self.hold_renewed >= holds.RENEW_SECONDS:
            self._hold(self.holding)

    def release_hold(self) -> None:
        """Let pruning have the snapshot this replica restored from: it has caught up, or left."""
        if self.holding is not None:
            holds.release(self.layout, self.partition, self.member)
            self.holding = None

    def catch_up(self, limit: int | None = None) -> int:
        """Apply the manifests that follow the head, at most `limit`; returns how many were examined.
        Manifests and their segments are read ahead while earlier ones apply (`prefetch`)."""
        count = 0
        ahead = Prefetch(self.layout, self.partition, self.head.next_seq)
        while limit is None or count < limit:
            found, segments = ahead.take(None if limit is None else limit - count)
            if found is None:
                if not self._pruned_past():
                    self.release_hold()  # caught up: the snapshot it started from is not needed
                    break
                self._jump_past(self.head.next_seq)
                ahead.restart(self.head.next_seq)
                continue
            self.apply(found, segments)
            self._renew_hold()
            count += 1
            if ahead.at != self.head.next_seq:  # it jumped to a snapshot
                ahead.restart(self.head.next_seq)
        return count

    def _pruned_past(self) -> bool:
        """Whether the next manifest is missing because the history was pruned past it (`history`)
        rather than not written yet. Asked at most every `FLOOR_CHECK_SECONDS` while a copy waits for
        new manifests: a copy with local state is never behind the floor while its mark is kept, so
        this is only the fallback for one whose mark retention dropped."""
        now = time.monotonic()
        if now - self.floor_checked_at < FLOOR_CHECK_SECONDS:
            return False
        self.floor_checked_at = now
        return manifests.floor(self.layout, self.partition).seq >= self.head.next_seq

    def apply(self, found: Manifest, segments: Segments | None = None) -> bool:
        """Examine the next manifest; apply its segments if it is accepted (from `segments`, their reads
        under way, when given). Returns whether it was.

        A segment that compaction already deleted means a snapshot at or after this manifest exists:
        the replica jumps to it instead.
        """
        step = manifests.advance(self.head, found)
        if step.accepted:
            with self.meter.timing() as timed:
                try:
                    if segments is None:
                        tables = [changelog.read_table(self.layout, name) for name in found.segments]
                    else:
                        tables = [segment.result() for segment in segments]
                except FileNotFoundError:
                    return self._jump_past(found.seq)
                for table in tables:
                    rows = self.state.apply_table(table)
                    timed.append(rows)
                    self._restored(rows)
                    self.cold_rows += table.num_rows
                    faults.reached("restore.segment-applied")
            if found.kind is Kind.BATCH:
                self.windows = found.windows
        self.head = step.head
        self._applied()
        return step.accepted

    def _jump_past(self, seq: int) -> bool:
        if self.head.seq >= 0:  # it had state to build on: the delta after it is gone
            self._fell_back("delta-expired")
        self.load_snapshot()
        if self.head.seq < seq:
            self.settle_checkpoint()
            if self.local is not None and self.opened:
                self.local.forget(self.partition)  # no checkpoint beside the store about to be cleared
            self.state.clear()
            self.head, self.windows, self.cold_rows = Head(), None, 0
            raise HistoryGone(
                f"partition {self.partition}: the history at seq {seq} is gone and no snapshot covers it"
            )
        return True

    def apply_own(self, committed: Manifest, changed: dict[str, Any]) -> None:
        """Record a batch this executor just committed, whose changed rows it already holds in memory."""
        step = manifests.advance(self.head, committed)
        if not step.accepted:
            raise RuntimeError(f"own manifest {committed.seq} refused: {step.reason}")
        self.state.upsert(list(changed.keys()), list(changed.values()))
        self.cold_rows += len(changed)
        self.head, self.windows = step.head, committed.windows
        self._applied()

    def owner_offset(self) -> int:
        """The input offset of the newest manifest (the owner's committed position), without applying it.

        Probing for newer manifests starts at the copy's head, and existence is monotone only above
        the history's floor. So a copy whose next manifests are gone looks for the newest above the
        floor instead: one that has applied nothing yet (restoring its first snapshot, which can take
        minutes), and one whose head is below the floor (a checkpoint kept on a member's volume while
        the history after it was compacted into a snapshot). Either found none after its head, reported
        the owner at its own offset — no lag — and the engine handed it the task as if it were caught
        up: the task then stood still for the whole restore. A head whose manifest still exists costs
        one more probe, and only when nothing newer is found."""
        if self.head.seq >= 0:
            latest = manifests.latest_seq(self.layout, self.partition, self.head.seq)
            newest = manifests.read(self.layout, self.partition, latest) if latest > self.head.seq else None
            if newest is not None:
                return newest.end
            if self.layout.store.exists(self.layout.manifest(self.partition, self.head.seq)):
                return self.head.offset
        floor = manifests.floor_copy(self.layout, self.partition)
        after = max(self.head.seq, floor.seq)
        latest = manifests.latest_seq(self.layout, self.partition, after)
        newest = manifests.read(self.layout, self.partition, latest) if latest > after else None
        return newest.end if newest is not None else max(floor.offset, self.head.offset)


def rebuild(layout: StateLayout, partition: int) -> Replica:
    """The committed state of a partition as of now (snapshot + every accepted manifest after it)."""
    replica = Replica(layout, partition)
    replica.load_snapshot()
    replica.catch_up()
    return replica
