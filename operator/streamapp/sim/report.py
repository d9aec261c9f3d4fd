"""Presenting simulation results: a side-by-side table and a timeline plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from streamapp.sim.measured import SimResult, Timeline

_ROWS: tuple[tuple[str, str], ...] = (
    ("generations", "generations"),
    ("task_movements", "task movements"),
    ("blocking_restore_records", "blocking restore (records)"),
    ("background_restore_records", "background restore (records)"),
    ("task_downtime_seconds", "task downtime (s, sum)"),
    ("max_task_downtime_seconds", "worst task downtime (s)"),
    ("longest_standstill_seconds", "longest stand-still (s)"),
    ("stall_seconds", "stall (s, sum)"),
    ("max_task_stall_seconds", "worst task stall (s)"),
    ("longest_stall_seconds", "longest gap's stall (s)"),
    ("double_ownership_violations", "double ownership"),
    ("converged", "converged"),
    ("final_spread", "final spread"),
    ("time_to_balance_seconds", "time to balance (s)"),
    ("processed_records", "processed records"),
    ("throughput_ratio", "throughput ratio"),
    ("min_window_throughput_ratio", "worst 60 s window"),
    ("revocation_timeouts", "revocation timeouts"),
    ("wasted_warmups", "wasted warmups"),
    ("in_place_restarts", "rollout restarts in place"),
    ("stuck_replacements", "stuck members replaced"),
    ("autoscaler", "autoscaler"),
    ("executor_seconds", "executor-seconds"),
    ("lag_over_target_seconds", "lag over target (s)"),
    ("reversals", "scale reversals"),
    ("resizes", "resizes"),
    ("worst_lag_seconds", "worst lag (s of processing)"),
    ("worst_lag_records", "worst lag (records)"),
)


def table(results: Sequence[SimResult]) -> str:
    """Metrics as rows, protocols as columns, aligned for a terminal or a Markdown code block."""
    header = ["metric", *(r.protocol for r in results)]
    rows = [header]
    for key, label in _ROWS:
        rows.append([label, *(_cell(r.to_json()[key]) for r in results)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for index, row in enumerate(rows):
        cells = [row[0].ljust(widths[0]), *(cell.rjust(widths[i]) for i, cell in enumerate(row[1:], 1))]
        lines.append("  ".join(cells))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    title = f"scenario: {results[0].scenario}" if results else "no results"
    return "\n".join([title, *lines])


def plot(runs: Sequence[tuple[SimResult, Timeline]], path: str | Path, event_times: Sequence[float]) -> Path:
    """Throughput and tasks not processed over time, one line per protocol, events marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure, (top, middle, bottom) = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    for result, timeline in runs:
        top.plot(timeline.time, timeline.throughput_ratio, label=result.protocol, linewidth=1.2)
        middle.plot(timeline.time, timeline.tasks_down, label=result.protocol, linewidth=1.2)
        bottom.step(timeline.time, timeline.generation, label=result.protocol, where="post", linewidth=1.2)
    top.set_ylabel("throughput / input rate")
    middle.set_ylabel("tasks not processed")
    bottom.set_ylabel("generations")
    bottom.set_xlabel("simulated seconds")
    for axis in (top, middle, bottom):
        for at in event_times:
            axis.axvline(at, color="grey", linestyle=":", linewidth=0.8)
        axis.grid(alpha=0.3)
    top.legend(loc="lower right")
    scenario = runs[0][0].scenario if runs else ""
    figure.suptitle(f"StreamApp rebalance simulation: {scenario}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
