"""A reader's hold on the snapshot it restores from, so pruning cannot delete it part way.

The owner keeps its `keep_snapshots` newest snapshots and deletes the rest, with their runs, the
changelog segments they cover and the manifests below them (`snapshots.prune`, `changelog.compact`,
`history.prune`). It publishes one every `snapshot_every` batches, so a snapshot is deleted about two
snapshot intervals after it appears. A copy that restores over a slow link (a large state, a far
bucket) takes longer than that: the snapshot it reads is deleted under it, the older ones are gone
already, and every newer one it tries next is deleted the same way. It could never finish.

So a member that starts reading a snapshot leaves a *hold* in the shared store under its name:

```
<state>/holds/p=<P>/<member>.json     {"member", "seq", "at"}: reading the snapshot after commit <seq>
```

The owner's prune keeps every snapshot a live hold names (and so, since the oldest kept snapshot is
what compaction and history pruning keep back to, the segments and manifests after it). The reader
renews its hold every `RENEW_SECONDS` while it reads the snapshot and replays the history after it,
and deletes it once it has caught up. A hold not renewed for `HOLD_SECONDS` belongs to a reader that
died: it no longer counts, and the next prune deletes it.

A prune that listed the holds just before a reader wrote its own can still delete that reader's
snapshot; the reader then finds a run missing and starts again from the newest snapshot, which that
prune kept and the next one sees held (`Replica.load_snapshot`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from streamapp.executor.state.layout import StateLayout

HOLD_SECONDS = 300.0
"""A hold older than this is a dead reader's: it keeps nothing."""
RENEW_SECONDS = 30.0
"""How often a reader renews its hold (well within `HOLD_SECONDS`, so a slow store cannot expire it)."""


@dataclass(frozen=True)
class Hold:
    """`member` reads (or replays the history after) the snapshot after commit `seq`; renewed at `at`
    (wall-clock seconds, as the owner compares it with its own clock)."""

    member: str
    seq: int
    at: float


def write(layout: StateLayout, partition: int, hold: Hold) -> None:
    """Place or renew `hold.member`'s hold."""
    body = {"member": hold.member, "seq": hold.seq, "at": hold.at}
    layout.store.put(layout.hold(partition, hold.member), json.dumps(body).encode())


def release(layout: StateLayout, partition: int, member: str) -> None:
    """The member is done with the snapshot it held."""
    layout.store.delete(layout.hold(partition, member))


def held(layout: StateLayout, partition: int, now: float) -> frozenset[int]:
    """The snapshot sequences live holds name; holds older than `HOLD_SECONDS` (their readers died)
    are deleted. An unreadable hold counts as absent: its reader rewrites it within `RENEW_SECONDS`."""
    folder = layout.holds(partition)
    live: set[int] = set()
    for name in layout.store.names(folder):
        if not name.endswith(".json"):
            continue
        try:
            body = json.loads(layout.store.get(f"{folder}/{name}"))
            found = Hold(member=str(body["member"]), seq=int(body["seq"]), at=float(body["at"]))
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            continue
        if now - found.at > HOLD_SECONDS:
            layout.store.delete(f"{folder}/{name}")
        else:
            live.add(found.seq)
    return frozenset(live)
