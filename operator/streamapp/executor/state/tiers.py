"""When a snapshot's runs are merged (`runs`, `snapshots`): the policy alone, pure.

Each snapshot adds one run (what changed since the previous one). Left alone, the runs would pile up
and a restore would read every change ever made; merged at every snapshot, each snapshot would rewrite
the whole state, which is what incremental snapshots avoid. Size tiers keep both small: the newest runs
are merged while the run before them is at most `FACTOR` times their rows, so runs grow geometrically
from newest to oldest. A state of B rows with deltas of d rows keeps about log₂(B/d) runs, a restore
reads at most about twice the state, and each changed row is rewritten about log₂(B/d) times in all.
`MAX_RUNS` caps the count whatever the sizes (and so the files a restore opens and a merge holds).
"""

from __future__ import annotations

from collections.abc import Sequence

FACTOR = 2
MAX_RUNS = 8


def merge_count(rows: Sequence[int], factor: int = FACTOR, max_runs: int = MAX_RUNS) -> int:
    """How many of the newest runs to merge into one (0: none), given each run's rows, oldest first."""
    taken, total = 1, rows[-1] if rows else 0
    while taken < len(rows):
        older = rows[-taken - 1]
        if older > factor * total and len(rows) - taken < max_runs:
            break
        total += older
        taken += 1
    return taken if taken >= 2 else 0
