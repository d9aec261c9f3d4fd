"""A partition's state rebuilt from its committed history: the newest snapshot plus accepted manifests.

Every reader of state goes through this: standbys and warmups tailing an owner, a new owner restoring
before it fences, and tools that check a partition. It needs neither Spark nor the source, only the state
path, and it only ever applies segments named by accepted manifests.
"""

from __future__ import annotations

from typing import Any

from streamapp.executor import changelog, faults
from streamapp.executor import manifest as manifests
from streamapp.executor.layout import StateLayout
from streamapp.executor.manifest import Head, Manifest
from streamapp.executor.state import KeyedState


class Replica:
    """State and history position of one partition on one executor."""

    def __init__(self, layout: StateLayout, partition: int) -> None:
        self.layout = layout
        self.partition = partition
        self.state = KeyedState()
        self.head = Head()

    def load_snapshot(self) -> int:
        """Start from the newest trustworthy snapshot; returns the keys loaded (0 if none).

        A snapshot is trusted when manifest `seq` still exists with the snapshot's epoch and offset. One
        pruned while being read is skipped for the next older one.
        """
        for name in changelog.snapshots_newest_first(self.layout, self.partition):
            try:
                table = changelog.read_table(self.layout, name)
                head = changelog.snapshot_head(table)
            except FileNotFoundError:
                continue
            committed = manifests.read(self.layout, self.partition, head.seq)
            if committed is None or committed.epoch != head.epoch or committed.end != head.offset:
                continue
            self.state = KeyedState()
            self.state.apply_table(table)
            self.head = head
            return len(self.state)
        return 0

    def catch_up(self, limit: int | None = None) -> int:
        """Apply the manifests that follow the head, at most `limit`; returns how many were examined."""
        count = 0
        while limit is None or count < limit:
            found = manifests.read(self.layout, self.partition, self.head.next_seq)
            if found is None:
                break
            self.apply(found)
            count += 1
        return count

    def apply(self, found: Manifest) -> bool:
        """Examine the next manifest; apply its segments if it is accepted. Returns whether it was.

        A segment that compaction already deleted means a snapshot at or after this manifest exists:
        the replica jumps to it instead.
        """
        step = manifests.advance(self.head, found)
        if step.accepted:
            try:
                tables = [changelog.read_table(self.layout, name) for name in found.segments]
            except FileNotFoundError:
                return self._jump_past(found.seq)
            for table in tables:
                self.state.apply_table(table)
                faults.reached("restore.segment-applied")
        self.head = step.head
        return step.accepted

    def _jump_past(self, seq: int) -> bool:
        self.load_snapshot()
        if self.head.seq < seq:
            raise RuntimeError(
                f"partition {self.partition}: segment of seq {seq} is gone and no snapshot covers it"
            )
        return True

    def apply_own(self, committed: Manifest, changed: dict[str, Any]) -> None:
        """Record a batch this executor just committed, whose changed rows it already holds in memory."""
        step = manifests.advance(self.head, committed)
        if not step.accepted:
            raise RuntimeError(f"own manifest {committed.seq} refused: {step.reason}")
        self.state.upsert(changed.keys(), changed.values())
        self.head = step.head

    def owner_offset(self) -> int:
        """The input offset of the newest manifest (the owner's committed position), without applying it."""
        latest = manifests.latest_seq(self.layout, self.partition, self.head.seq)
        newest = manifests.read(self.layout, self.partition, latest) if latest > self.head.seq else None
        return newest.end if newest is not None else self.head.offset


def rebuild(layout: StateLayout, partition: int) -> Replica:
    """The committed state of a partition as of now (snapshot + every accepted manifest after it)."""
    replica = Replica(layout, partition)
    replica.load_snapshot()
    replica.catch_up()
    return replica
