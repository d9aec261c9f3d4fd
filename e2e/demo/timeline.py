"""The demo's timeline plot: committed records, owner and commit gaps of every task, events marked.

Same style as the simulator's plot (`streamapp.sim.report.plot`), but every point is a commit manifest
the demo saw on the shared store.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from demo.commits import Commit


def plot(
    commits: Sequence[Commit], partitions: int, events: Sequence[tuple[float, str]], origin: float, path: Path
) -> Path:
    """Three panels over seconds since the app was created; one line (or colour) per task or member."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure, (top, middle, bottom) = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    owners = sorted({c.owner for c in commits})
    colours = {owner: f"C{index % 10}" for index, owner in enumerate(owners)}
    for partition in range(partitions):
        mine = sorted((c for c in commits if c.partition == partition), key=lambda c: c.at)
        times = [c.at - origin for c in mine]
        top.step(times, [c.end for c in mine], where="post", label=f"task {partition}", linewidth=1.2)
        # each gap drawn over the interval it spans: a stand-still is a plateau, not a spike
        bottom.step(times[1:], [b.at - a.at for a, b in itertools.pairwise(mine)], where="pre", linewidth=1.0)
    for owner in owners:
        mine = [c for c in commits if c.owner == owner]
        middle.scatter(
            [c.at - origin for c in mine], [c.partition for c in mine], s=6, color=colours[owner], label=owner
        )
    top.set_ylabel("committed records")
    middle.set_ylabel("task (colour: owner)")
    middle.set_yticks(range(partitions))
    bottom.set_ylabel("seconds since previous commit")
    bottom.set_xlabel("seconds since the app was created")
    for axis in (top, middle, bottom):
        for at, _ in events:
            axis.axvline(at - origin, color="grey", linestyle=":", linewidth=0.8)
        axis.grid(alpha=0.3)
    for number, (at, _) in enumerate(events, 1):
        top.annotate(
            str(number), (at - origin, 1.01), xycoords=("data", "axes fraction"), fontsize=8, ha="center"
        )
    caption = "   ".join(f"{number}: {label}" for number, (_, label) in enumerate(events, 1))
    figure.text(0.5, 0.005, caption, ha="center", va="bottom", fontsize=7, wrap=True)
    top.legend(loc="lower right", fontsize=8)
    middle.legend(loc="upper left", fontsize=8, markerscale=3)
    figure.suptitle("StreamApp demo on the local control plane: real executors, measured from the commits")
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
