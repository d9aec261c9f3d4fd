"""A small timeline per scenario: one panel per protocol, each task's seconds since its previous commit
over the phase, the phase's events marked. A stand-still is a plateau above the usual cadence."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from clusterbench.apps import BenchApp
from clusterbench.runner import Window

LEAD_S = 10.0  # shown before the phase's action


def plot_phase(apps: Sequence[BenchApp], windows: Sequence[Window], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure, grid = plt.subplots(
        len(windows), 1, figsize=(7.5, 1.7 * len(windows) + 0.8), sharex=True, squeeze=False
    )
    axes = grid[:, 0]  # one row per window, also when a run has a single app
    by_protocol = {app.protocol: app for app in apps}
    for axis, window in zip(axes, windows, strict=True):
        app = by_protocol[window.protocol]
        since, until = window.started - LEAD_S, window.ended
        for partition in range(app.partitions):
            mine = sorted(
                c.at for c in app.commits.commits if c.partition == partition and since <= c.at <= until
            )
            axis.step(
                [b - window.started for b in mine[1:]],
                [b - a for a, b in itertools.pairwise(mine)],
                where="pre",
                linewidth=1.0,
                label=f"task {partition}",
            )
        for at, label in app.events:
            if since <= at <= until:
                axis.axvline(at - window.started, color="grey", linestyle=":", linewidth=0.8)
                axis.annotate(
                    label, (at - window.started, 0.95), xycoords=("data", "axes fraction"), fontsize=6
                )
        if window.recovered is not None:
            axis.axvline(window.recovered - window.started, color="green", linestyle="--", linewidth=0.8)
        axis.set_ylabel(f"{window.protocol}\ngap s", fontsize=8)
        axis.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=6, ncol=4)
    axes[-1].set_xlabel("seconds since the phase's action (green: recovered)")
    figure.suptitle(f"{windows[0].phase}: seconds between a task's commits, real executors", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path
