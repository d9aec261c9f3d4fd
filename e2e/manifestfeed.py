"""Following a partition's commit manifests from outside the executors, one poll at a time.

Observers (the chaos suite's, the demo's) read what executors commit while they run, so each poll starts
where the last one ended and stops at the first manifest not published yet.
"""

from __future__ import annotations

from collections.abc import Iterator

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
            return
        step = manifests.advance(head, found)
        yield found, step
        head = step.head
