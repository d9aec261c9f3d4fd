"""How far back a partition's changelog is kept: to the oldest member-local checkpoint still within its
retention, so a member that gets a task back replays only the delta instead of restoring in full.

Snapshots alone would let compaction delete every segment an older snapshot covers, which is what made a
member returning after ~20-40 batches restore everything. So each member that checkpoints a task's local
store also leaves a *mark* in the shared store (`changelog.write_mark`): which sequence its checkpoint
holds, and when. Compaction keeps the segments after the oldest mark that is

* younger than `Retention.seconds` (`stateStore.deltaRetention`): an older checkpoint belongs to a member
  that is not coming back soon, and members delete their local state of a task that long after it left
  them anyway; and
* within `Retention.max_bytes` (`stateStore.deltaRetentionSize`) of segments kept beyond what the
  snapshots need: a long-lived mark of a busy partition would otherwise pin an unbounded changelog. Over
  the bound, the oldest mark loses its delta first.

Marks that fall out are deleted with the segments they held. Pure: the caller lists the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamapp.units import UnitError, byte_count, parse_duration


@dataclass(frozen=True)
class Retention:
    """How long, and up to how many segment bytes per task, a member's checkpoint keeps its delta (the
    defaults are the spec's, given by the executor: `executor.task.DEFAULT_RETENTION`)."""

    seconds: float
    max_bytes: int


def retention_of(duration: str, size: str) -> Retention:
    """A Retention from the spec's spelling (`stateStore.deltaRetention`, `deltaRetentionSize`);
    ValueError naming the field when either does not parse."""
    try:
        seconds = parse_duration(duration, "deltaRetention")
    except UnitError as error:
        raise ValueError(str(error)) from None
    max_bytes = byte_count(size)
    if max_bytes is None:
        raise ValueError(f"deltaRetentionSize: {size!r} is not a positive quantity such as 512Mi or 1Gi")
    return Retention(seconds=seconds, max_bytes=max_bytes)


@dataclass(frozen=True)
class Mark:
    """A member's local checkpoint of one task as the shared store knows it: its head `seq`, taken at
    `at` (wall-clock seconds)."""

    member: str
    seq: int
    at: float


@dataclass(frozen=True)
class Compaction:
    """What to delete: segments up to `delete_through` (inclusive) and the marks that no longer hold any."""

    delete_through: int
    dropped: tuple[Mark, ...]


def decide(
    marks: Iterable[Mark], segment_bytes: Mapping[int, int], covered: int, retention: Retention, now: float
) -> Compaction:
    """`covered`: the oldest kept snapshot's sequence (what a restore without a checkpoint starts from);
    `segment_bytes`: bytes of the segments of each sequence.

    Never deletes past `covered`: a snapshot restore needs every segment after it.
    """
    all_marks = sorted(marks, key=lambda mark: (mark.seq, mark.member))
    live = [mark for mark in all_marks if now - mark.at <= retention.seconds]
    while live and _held(live[0].seq, covered, segment_bytes) > retention.max_bytes:
        live.pop(0)
    floor = min(covered, live[0].seq) if live else covered
    kept = set(live)
    return Compaction(floor, tuple(mark for mark in all_marks if mark not in kept))


def _held(floor: int, covered: int, segment_bytes: Mapping[int, int]) -> int:
    """Bytes kept beyond the snapshots' needs when segments after `floor` stay."""
    return sum(size for seq, size in segment_bytes.items() if floor < seq <= covered)
