"""A returning member replays the changelog after its checkpoint only when that reads fewer bytes than a
full restore (the newest snapshot and the changelog after it); otherwise it restores in full and says
why (`delta-larger`)."""

from __future__ import annotations

from pathlib import Path

from dataplane_checks import commit

from streamapp.executor.state import snapshots
from streamapp.executor.state.layout import StateLayout
from streamapp.executor.state.localstate import LocalState
from streamapp.executor.state.manifest import Head
from streamapp.executor.state.replica import Replica, rebuild

HOT_KEYS = 40
COLD_KEYS = 1_000


def away_for(tmp_path: Path, batches: int) -> tuple[StateLayout, Replica]:
    """A state of mostly cold keys; a member checkpoints the task and leaves; the owner commits
    `batches` more, each rewriting every hot key, and snapshots; the member comes back to its local
    state."""
    layout = StateLayout(tmp_path / "state")
    head = commit(layout, Head(), {f"cold{key}": key for key in range(COLD_KEYS)})
    for batch in range(10):
        head = commit(layout, head, {f"k{key}": batch for key in range(HOT_KEYS)})
    local = LocalState(tmp_path / "local")
    member = Replica(layout, 0, local, member="m")
    member.resume()
    member.catch_up()
    member.checkpoint()
    member.close()
    local.close()
    for batch in range(10, 10 + batches):
        head = commit(layout, head, {f"k{key}": batch for key in range(HOT_KEYS)})
    snapshots.write(layout, 0, head, "long")
    return layout, Replica(layout, 0, LocalState(tmp_path / "local"), member="m")


def test_a_member_away_for_many_batches_of_hot_keys_restores_in_full(tmp_path: Path) -> None:
    layout, back = away_for(tmp_path, batches=60)
    assert not back.resume()
    assert (back.full_restores, back.full_restore_reason) == (1, "delta-larger")
    back.load_snapshot()
    back.catch_up()
    assert dict(back.state.items()) == dict(rebuild(layout, 0).state.items())


def test_a_member_away_for_a_few_batches_replays_them(tmp_path: Path) -> None:
    layout, back = away_for(tmp_path, batches=1)
    assert back.resume()
    assert back.full_restores == 0
    back.catch_up()
    assert dict(back.state.items()) == dict(rebuild(layout, 0).state.items())
