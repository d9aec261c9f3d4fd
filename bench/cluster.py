"""`make bench-cluster`: the rebalance scenarios on the local cluster with real executors, all three
protocols side by side, measured from outside, several runs; then the simulator calibrated on the first
run and checked against the others. Writes bench/results/cluster.md, cluster-summary.json, cluster.json
and a plot per scenario.

Each run's raw observations go to the record's `cluster-runs/` (gzipped JSON) as soon as it ends, and
the report is written again from every run on record: a series stopped half-way (`--runs 3` took hours)
resumes with the runs it lacks. `--report` writes the report again from the recorded runs alone, no
cluster: every figure of bench/results/cluster.md regenerates with it. `--quick` is a smaller, shorter
run (same phases); the record is made of quick runs.
"""

from __future__ import annotations

import argparse
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

from clusterbench import analysis, raw, report, series, simcompare  # noqa: E402
from clusterbench.plots import plot_phase  # noqa: E402
from clusterbench.runner import PROTOCOLS, Run, Settings, run_on_cluster  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CALIBRATED = Path(__file__).resolve().parent / "scenarios" / "calibrated"
DEFAULT_RESTORE_RATE = 2000.0


def measure(settings: Settings, command: str, path: Path) -> dict[str, Any]:
    """One cluster run; its raw observations, and what only its files can tell (latency from the input's
    timestamps, the exactly-once check, the state's size), are written to `path` at once."""
    began, load_start = time.monotonic(), os.getloadavg()[0]
    extra: dict[str, Any] = {
        "command": command,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": load_start,
        "machine": report.machine(),
    }

    def finish(run: Run) -> None:
        extra.update(minutes=(time.monotonic() - began) / 60, load_end=os.getloadavg()[0])
        print("measuring from the manifests and the input", flush=True)
        extra["from_files"] = analysis.from_files(run)

    run = run_on_cluster(settings, finish)
    raw.dump(run, path, extra)
    return raw.read(path)


def derive(doc: dict[str, Any], first: bool, plotted: Path) -> dict[str, Any]:
    """Everything measured from one recorded run, as the JSON the report is written from. The `first`
    run's plots go into `plotted`, and the simulator is calibrated on it alone: the others are the
    held-out check, and nothing is fitted to them."""
    run, extra = raw.load(doc)
    rows = analysis.rows(run, extra["from_files"]["latency"])
    derived = {
        "choices": analysis.choices(run),
        **{k: v for k, v in extra.items() if k != "from_files"},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(run.settings).items()},
        "failed": run.failed,
        "rows": rows,
        "exactly_once": extra["from_files"]["exactly_once"],
        "preload_s": run.preload_s,
    }
    if first:
        plots(run, plotted)
        state_rows, cores = extra["from_files"]["state_rows"], extra["machine"]["nproc"]
        derived["calibration"] = analysis.calibration(run, rows, state_rows, cores)
    return derived


def plots(run: Run, directory: Path) -> None:
    for scenario in report.SCENARIOS:
        windows = [w for w in run.windows if w.phase == scenario]
        if windows:
            name = report.plot_name({"settings": vars(run.settings)}, scenario)
            plot_phase(run.apps, windows, directory / name)


def compare(results: dict[str, Any], scenarios: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Calibrated scenario files (into `scenarios`), the simulator on each, its figures put into the
    rows; returns the predictions by (scenario, protocol)."""
    calibration = dict(results["calibration"])
    calibration["restore_rate_per_task"] = calibration["restore_rate_per_task"] or DEFAULT_RESTORE_RATE
    calibration["process_rate_per_task"] = calibration["process_rate_per_task"] or 1.0
    settings = results["settings"]
    paths = simcompare.write_scenarios(
        results["rows"], calibration, settings["partitions"], settings["delay"], scenarios
    )
    predicted = {}
    for row, path in zip(results["rows"], paths, strict=True):
        row["predicted"] = simcompare.predict(path)
        row["measured_terms"] = simcompare.measured_terms(row)
        predicted[(row["phase"], row["protocol"])] = row["predicted"]
    return predicted


def write_report(record: Path, write: Path, plotted: Path, scenarios: Path, notes: Path | None) -> int:
    """Per regime with runs on record, its report and JSON (`write`, and `-large` beside it); the summary
    and headline of every regime; 1 if a run's output was not exactly once."""
    summaries: list[dict[str, Any]] = []
    headlines: list[str] = []
    failed: list[str] = []
    for regime in series.REGIMES:
        docs = [raw.read(path) for path in series.recorded(record, regime)]
        if not docs:
            continue
        runs = [derive(doc, number == 0, plotted) for number, doc in enumerate(docs)]
        where = series.regime_path(scenarios, regime)
        predicted = compare(runs[0], where)
        summary = series.summary(runs)
        checked = series.held_out(predicted, runs)
        target = series.regime_path(write, regime)
        raw.write_json(target.with_suffix(".json"), {"runs": runs, "summary": summary, "held_out": checked})
        shown = f"bench/scenarios/{where.name}/" if scenarios == CALIBRATED else f"{where}/"
        noted = None if notes is None else series.regime_path(notes, regime)
        target.write_text(report.render(runs, summary, checked, noted, shown))
        print(f"wrote {target} from {len(runs)} run(s)")
        summaries += summary
        headlines.append(report.headline(runs, summary))
        failed += [p for r in runs for p, text in r["exactly_once"].items() if not text.startswith("ok")]
    if not summaries:
        print(f"no run recorded in {record}", file=sys.stderr)
        return 1
    raw.write_json(write.with_name("cluster-summary.json"), summaries)
    write.with_name("cluster-headline.md").write_text("\n".join(headlines))
    return 1 if failed else 0


class Stopped(BaseException):
    """SIGTERM: leave as Ctrl-C does, through every clean-up (not an error a phase survives)."""


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
    parser.add_argument(
        "--large",
        action="store_true",
        help="the large regime: the quick run over millions of keys per task, each app's store an S3 "
        "server behind a slow link, so a cold restore takes minutes (needs root)",
    )
    parser.add_argument("--runs", type=int, default=3, help="runs in the series (default 3)")
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
    parser.add_argument(
        "--report", action="store_true", help="no cluster: write the report from the runs on record"
    )
    args = parser.parse_args(argv)
    # The record (bench/results/cluster.md) keeps its runs, plots, notes and calibrated scenarios where
    # the README and `make bench` read them; any other --write gets all of them beside it.
    is_record = args.write.resolve() == (RESULTS / "cluster.md").resolve()
    if is_record and (args.only or args.protocol) and not args.report:
        parser.error(
            "--only and --protocol run part of the bench: give --write elsewhere, not over the record"
        )
    record = args.write.parent / "cluster-runs"
    plotted, scenarios = (
        (RESULTS, CALIBRATED) if is_record else (args.write.parent, args.write.parent / "calibrated")
    )
    notes = RESULTS / "cluster-notes.md" if is_record else None
    if args.report:
        return write_report(record, args.write, plotted, scenarios, notes)
    settings = (
        Settings.large(args.out)
        if args.large
        else Settings.quick(args.out)
        if args.quick
        else Settings(args.out)
    )
    settings = replace(settings, only=tuple(args.only), protocols=tuple(args.protocol) or PROTOCOLS)
    command = f"bench/cluster.py {shlex.join(sys.argv[1:] if argv is None else argv)}"
    print(f"invoked as: {shlex.join(sys.argv)}", flush=True)
    status = 0
    for number in range(1, args.runs + 1):
        path = series.run_path(record, settings.regime, number)
        if path.exists():
            print(f"run {number}/{args.runs} on record ({path}): skipped", flush=True)
            continue
        print(f"run {number}/{args.runs}", flush=True)
        with interruptible():
            measure(settings, command, path)
        status = write_report(record, args.write, plotted, scenarios, notes)
    return status


if __name__ == "__main__":
    sys.exit(main())
