"""Following a partition's commit manifests from outside the executors, one poll at a time.

Observers (the chaos suite's, the demo's) read what executors commit while they run, so each poll starts
where the last one ended and stops at the first manifest not published yet. An observer that fell behind
the prune floor (`streamapp.executor.state.history`) goes on from the archives, which keep the accepted
manifests only.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

from streamapp.executor.state import history
from streamapp.executor.state import manifest as manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.manifest import Head, Manifest, Step


def published_after(state: StateLayout, partition: int, head: Head) -> Iterator[tuple[Manifest, Step]]:
    """Each manifest published after `head`, in order, with the step it makes (its `.head` is where the
    next poll starts, whether the manifest was accepted or refused)."""
    while True:
        try:
            found = manifests.read(state, partition, head.next_seq)
        except (ValueError, KeyError):  # caught mid-write: read it again next time
            return
        if found is None:
            if manifests.floor(state, partition).seq < head.next_seq:
                return
            moved = yield from _archived_after(state, partition, head)
            if moved == head:
                return  # pruned with no archive past `head`: a damaged history; stop rather than spin
            head = moved
            continue
        step = manifests.advance(head, found)
        yield found, step
        head = step.head


def _archived_after(
    state: StateLayout, partition: int, head: Head
) -> Generator[tuple[Manifest, Step], None, Head]:
    """The accepted manifests archived after `head`; returns the head at the end of the archives."""
    for archive in history.archives(state, partition, after=head.seq):
        for kept in archive.accepted:
            if kept.seq > head.seq:
                step = Step(Head(seq=kept.seq, offset=kept.end, epoch=kept.epoch), True)
                yield kept, step
                head = step.head
        head = archive.head
    return head
