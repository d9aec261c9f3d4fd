"""A partition's committed history over time: live manifests above a floor, archives below it.

One manifest per batch would otherwise pile up for ever (86,400 objects a day for a partition
committing every second), although only the recent ones are read: a restore starts at a snapshot, a
member back from a restart at its checkpoint, a new owner's publisher at the last published batch. So
after each snapshot the owner prunes (`prune`) the manifests no reader starts below:

```
history/p=<P>/floors/<F>.json          the head at F: manifests at or below F may be gone
history/p=<P>/archive-<F>-from-<E>.json   the accepted manifests of [E, F] (E: the previous floor + 1),
                                         and the head at F; one prune's, or several merged
history/p=<P>/floor.json               a copy of the newest floor, which every commit reads
```

In that order: the archive is written, then the floor, then the manifests are deleted, so whatever a
crash interrupts, every accepted manifest is in an archive or still in place. The floor is the newest
of the marks, each created once: a prune that a revoked owner finishes late (it read the floor before
a newer prune) creates an older mark, which does not move the floor back. The copy it puts may be
older for a while; the next prune puts the newest again. Readers of the whole
history (outputs, tools: `accepted_manifests`) read the archives, then the live manifests above the newest one,
and look at the floor again whenever a manifest they expect is missing (pruned while they read).

Fencing relies on a manifest's name being taken; a pruned name is free again. A writer that still has a
head below the floor (an owner fenced long ago that never noticed) could create a manifest there, in a
range no reader looks at: `manifest.create` reads the floor after every create it wins, and such a
manifest is deleted and its writer told it is fenced (`Fenced`), as it would have been by the manifest
it replaced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from streamapp.executor.state import changelog, tiers
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head, Manifest


@dataclass(frozen=True)
class Archive:
    """The accepted manifests of one pruned range, and the head they lead to."""

    through: int
    head: Head
    accepted: tuple[Manifest, ...]

    def to_json(self) -> bytes:
        head = {"seq": self.head.seq, "offset": self.head.offset, "epoch": self.head.epoch}
        body = [json.loads(found.to_json()) for found in self.accepted]
        return json.dumps({"format": 1, "through": self.through, "head": head, "manifests": body}).encode()

    @staticmethod
    def from_json(data: bytes) -> Archive:
        body = json.loads(data)
        head = Head(
            seq=int(body["head"]["seq"]), offset=int(body["head"]["offset"]), epoch=int(body["head"]["epoch"])
        )
        found = tuple(Manifest.from_json(json.dumps(item).encode()) for item in body["manifests"])
        return Archive(through=int(body["through"]), head=head, accepted=found)


@dataclass(frozen=True)
class Span:
    """An archive's name and the range of sequences it covers, [first, through], from its name
    (`archive-<through>-from-<first>.json`); one named only by its end (written before ranges were
    named) starts where the one before it ends."""

    first: int
    through: int
    name: str


def spans(names: Iterable[str]) -> list[Span]:
    """The archives among a history folder's names, by range end."""
    found: list[tuple[int, int | None, str]] = []
    for name in names:
        if name.startswith("archive-") and name.endswith(".json"):
            end, _, start = name.removeprefix("archive-").removesuffix(".json").partition("-from-")
            found.append((int(end), int(start) if start else None, name))
    found.sort(key=lambda item: (item[0], item[1] if item[1] is not None else item[0]))
    out: list[Span] = []
    previous = -1
    for through, first, name in found:
        out.append(Span(previous + 1 if first is None else first, through, name))
        previous = through
    return out


def archives(layout: StateLayout, partition: int, after: int = -1) -> Iterator[Archive]:
    """The archives that continue the history after sequence `after`, in order: each time the one
    reaching furthest among those starting at or before the next sequence. Archives overlap while a
    merge is under way, or after one a crash interrupted; this walk reads each range once and never
    skips one. An archive merged away since the listing is passed over (another covers it, or the
    caller's next listing finds the merge)."""
    folder = layout.history(partition)
    left = spans(layout.store.names(folder))
    head = after
    while usable := [span for span in left if span.first <= head + 1 < span.through + 1]:
        span = max(usable, key=lambda found: found.through)
        left.remove(span)
        try:
            archive = Archive.from_json(layout.store.get(f"{folder}/{span.name}"))
        except FileNotFoundError:
            continue
        yield archive
        head = archive.through


def merge_archives(layout: StateLayout, partition: int) -> int:
    """Merge the newest archives by size tiers (`tiers`, as a snapshot's runs), so a partition keeps
    at most `tiers.MAX_RUNS` archives however long it runs, and each pruned manifest is rewritten about
    log₂ times in all. The merge is created first and its parts deleted after, so a crash leaves
    overlapping archives, never a gap. Returns how many archives were merged (0: none)."""
    folder = layout.history(partition)
    sizes = layout.store.sizes(folder)
    listed = spans(sizes)
    count = tiers.merge_count([sizes[span.name] for span in listed])
    if not count:
        return 0
    merging = sorted(listed[-count:], key=lambda span: span.first)
    reach = merging[0].first - 1
    for span in merging:
        if span.first > reach + 1:
            return 0  # not one contiguous range: left as they are
        reach = max(reach, span.through)
    try:
        parts = [Archive.from_json(layout.store.get(f"{folder}/{span.name}")) for span in merging]
    except FileNotFoundError:
        return 0  # merged meanwhile by another writer (a revoked owner's late job)
    first = merging[0].first
    by_seq = {kept.seq: kept for part in parts for kept in part.accepted if kept.seq >= first}
    last = max(parts, key=lambda part: part.through)
    merged = Archive(last.through, last.head, tuple(by_seq[seq] for seq in sorted(by_seq)))
    target = layout.archive(partition, merged.through, first)
    layout.store.create(target, merged.to_json())  # one already there covers the same range
    for span in merging:
        if f"{folder}/{span.name}" != target:
            layout.store.delete(f"{folder}/{span.name}")
    return count


def accepted_manifests(layout: StateLayout, partition: int) -> Iterator[Manifest]:
    """Every accepted manifest of the partition in commit order (refused zombie manifests skipped),
    archived ones included."""
    head = Head()
    while True:
        for archive in archives(layout, partition, after=head.seq):
            yield from (kept for kept in archive.accepted if kept.seq > head.seq)
            head = archive.head
        while (found := manifests.read(layout, partition, head.next_seq)) is not None:
            step = manifests.advance(head, found)
            head = step.head
            if step.accepted:
                yield found
        pruned = manifests.floor(layout, partition).seq
        if pruned < head.next_seq:
            return  # the end of the history, not a pruned manifest
        if not any(True for _ in archives(layout, partition, after=head.seq)):
            raise RuntimeError(
                f"partition {partition}: pruned through {pruned} with no archive after {head.seq}"
            )


def readers_start(layout: StateLayout, partition: int, covered: int) -> int:
    """The lowest sequence a reader may still start from: the oldest kept snapshot's (`covered`,
    whose manifest its trust check reads; -1 when there is none) or a member checkpoint's anchor (the
    newest batch manifest at or before the sequence its mark names, which `localstate` checks)."""
    start = covered
    for mark in changelog.read_marks(layout, partition):
        found = manifests.read(layout, partition, mark.seq)
        anchor = manifests.anchor(layout, partition, found) if found is not None else None
        if anchor is not None:
            start = min(start, anchor.seq)
    return start


def prune(layout: StateLayout, partition: int, below: int) -> int:
    """Archive and delete the manifests below `below` (which readers still start from); returns how
    many were deleted."""
    old = manifests.floor(layout, partition)
    through = below - 1
    if through <= old.seq:
        return 0
    head = old
    kept: list[Manifest] = []
    while head.seq < through:
        found = manifests.read(layout, partition, head.next_seq)
        if found is None:
            raise RuntimeError(f"partition {partition}: manifest {head.next_seq} is missing below {below}")
        step = manifests.advance(head, found)
        if step.accepted:
            kept.append(found)
        head = step.head
    # Created, never replaced: an archive of the same range already there holds the same manifests.
    archived = Archive(through, head, tuple(kept))
    layout.store.create(layout.archive(partition, through, old.seq + 1), archived.to_json())
    body = json.dumps({"seq": head.seq, "offset": head.offset, "epoch": head.epoch}).encode()
    layout.store.create(layout.floor_mark(partition, through), body)
    newest = manifests.floor(layout, partition)  # a newer prune's, when this one was overtaken
    copy = {"seq": newest.seq, "offset": newest.offset, "epoch": newest.epoch}
    layout.store.put(layout.floor(partition), json.dumps(copy).encode())
    for name in layout.store.names(layout.floors(partition)):
        if name.endswith(".json") and int(name.removesuffix(".json")) < newest.seq:
            layout.store.delete(f"{layout.floors(partition)}/{name}")
    for seq in range(old.seq + 1, through + 1):
        layout.store.delete(layout.manifest(partition, seq))
    merge_archives(layout, partition)
    return through - old.seq
