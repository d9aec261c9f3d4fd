"""`make bench-cluster`: the rebalance scenarios on the local cluster with real executors, all three
protocols side by side, measured from outside; then the simulator on the same phases, calibrated from
the run, beside the measurements. Writes bench/results/cluster.md, cluster.json and a plot per scenario.

`--quick` is a smaller, shorter run (same phases). `--from-raw` (a run's out/cluster-bench-raw.json,
its input and state still in out/) redoes the measurements, plots, comparison and report without the
cluster; `--from-json` (bench/results/cluster.json) only the comparison and the report.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

sys.path[:0] = [
    str(Path(__file__).resolve().parent),
    *(str(Path(__file__).resolve().parents[1] / p) for p in ("e2e", "tests/executor")),
]

from clusterbench import analysis, raw, report, simcompare  # noqa: E402
from clusterbench.plots import plot_phase  # noqa: E402
from clusterbench.runner import PROTOCOLS, Run, Settings, run_on_cluster  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CALIBRATED = Path(__file__).resolve().parent / "scenarios" / "calibrated"
DEFAULT_RESTORE_RATE = 2000.0


def measure(settings: Settings, command: str) -> tuple[Run, dict[str, Any]]:
    """The cluster run; its raw observations are written at once (out/cluster-bench-raw.json)."""
    began, load_start = time.monotonic(), os.getloadavg()[0]
    extra: dict[str, Any] = {
        "command": command,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": load_start,
        "machine": report.machine(),
    }
    run = run_on_cluster(settings)
    extra.update(minutes=(time.monotonic() - began) / 60, load_end=os.getloadavg()[0])
    raw.dump(run, settings.out / "cluster-bench-raw.json", extra)
    return run, extra


def derive(run: Run, extra: dict[str, Any], plotted: Path) -> dict[str, Any]:
    """Everything measured from a run, as the JSON the report is written from; and the plots (into
    `plotted`)."""
    print("measuring from the manifests and the input", flush=True)
    rows = analysis.rows(run)
    plots(run, plotted)
    return {
        **extra,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(run.settings).items()},
        "failed": run.failed,
        "rows": rows,
        "calibration": analysis.calibration(run, rows),
        "exactly_once": {app.protocol: analysis.exactly_once(app) for app in run.apps},
        "preload_s": run.preload_s,
    }


def plots(run: Run, directory: Path) -> None:
    for scenario in report.SCENARIOS:
        windows = [w for w in run.windows if w.phase == scenario]
        if windows:
            plot_phase(run.apps, windows, directory / f"cluster-{scenario}.png")


def compare(results: dict[str, Any], scenarios: Path) -> None:
    """Calibrated scenario files (into `scenarios`), the simulator on each, its figures put into the rows."""
    calibration = dict(results["calibration"])
    calibration["restore_rate_per_task"] = calibration["restore_rate_per_task"] or DEFAULT_RESTORE_RATE
    calibration["process_rate_per_task"] = calibration["process_rate_per_task"] or 1.0
    settings = results["settings"]
    paths = simcompare.write_scenarios(
        results["rows"], calibration, settings["partitions"], settings["delay"], scenarios
    )
    for row, path in zip(results["rows"], paths, strict=True):
        row["predicted"] = simcompare.predict(path)
        row["measured_terms"] = simcompare.measured_terms(row)


class Stopped(Exception):
    """SIGTERM: leave as Ctrl-C does, through every clean-up."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(f"signal {signum}")


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C and SIGTERM end the run through its clean-up (the cluster stopped), even when started
    from a shell that ignores SIGINT (a script's `&`)."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/cluster.py", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller state, lower rate, shorter holds")
    parser.add_argument("--only", action="append", default=[], help="run only this phase (repeatable)")
    parser.add_argument(
        "--protocol",
        action="append",
        choices=PROTOCOLS,
        default=[],
        help="run only this protocol's app (repeatable; default all three side by side): its absolute "
        "figures without the other apps' executors on the same cores",
    )
    parser.add_argument("--out", type=Path, default=Path("out"), help="where the apps' files go")
    parser.add_argument("--write", type=Path, default=RESULTS / "cluster.md")
    parser.add_argument("--from-json", type=Path, help="no cluster: compare and report from this JSON")
    parser.add_argument("--from-raw", type=Path, help="no cluster: measure, compare, report from a raw run")
    args = parser.parse_args(argv)
    # The record (bench/results/cluster.md) keeps its plots, notes and calibrated scenarios where the
    # README and `make bench` read them; any other --write gets all of them beside it.
    record = args.write.resolve() == (RESULTS / "cluster.md").resolve()
    if record and (args.only or args.protocol) and not (args.from_json or args.from_raw):
        parser.error(
            "--only and --protocol run part of the bench: give --write elsewhere, not over the record"
        )
    plotted, scenarios = (
        (RESULTS, CALIBRATED) if record else (args.write.parent, args.write.parent / "calibrated")
    )
    if args.from_json:
        results = json.loads(args.from_json.read_text())
    elif args.from_raw:
        results = derive(*raw.load(args.from_raw), plotted)
    else:
        settings = Settings.quick(args.out) if args.quick else Settings(args.out)
        settings = replace(settings, only=tuple(args.only), protocols=tuple(args.protocol) or PROTOCOLS)
        command = f"bench/cluster.py {shlex.join(sys.argv[1:] if argv is None else argv)}"
        print(f"invoked as: {shlex.join(sys.argv)}", flush=True)
        with interruptible():
            results = derive(*measure(settings, command), plotted)
    compare(results, scenarios)
    json_path = args.write.with_suffix(".json")
    json_path.write_text(json.dumps(results, indent=1) + "\n")
    shown = "bench/scenarios/calibrated/" if record else f"{scenarios}/"
    args.write.write_text(report.render(results, RESULTS / "cluster-notes.md" if record else None, shown))
    args.write.with_name("cluster-headline.md").write_text(report.headline(results))
    print(f"wrote {args.write} and {json_path}")
    failed = [p for p, text in results["exactly_once"].items() if not text.startswith("ok")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
