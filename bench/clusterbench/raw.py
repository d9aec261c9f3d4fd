"""A run's raw observations as gzipped JSON, written before anything is derived from them, so the
analysis, the report and the simulator comparison can be done again without running the cluster again.

What only the run's files can tell — each record's append time (for latency), the exactly-once check
against the input, the state's size — is computed once at the run's end and kept beside them
(`from_files`): the files themselves (input, state, outputs) are far too big to keep.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clusterbench import series
from clusterbench.apps import BenchApp
from clusterbench.runner import Run, Settings, Window
from demo.commits import Commit

RUN_KEYS = {"settings", "preload_s", "fed_from", "fed_until", "failed", "windows", "apps"}


def dump(run: Run, path: Path, extra: dict[str, Any]) -> None:
    """Settings, windows and, per app, its events, restore samples and every commit seen."""
    doc = {
        **extra,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(run.settings).items()},
        "preload_s": run.preload_s,
        "fed_from": run.fed_from,
        "fed_until": run.fed_until,
        "failed": run.failed,
        "windows": [asdict(w) for w in run.windows],
        "apps": [
            {
                "protocol": app.protocol,
                "root": str(app.root),
                "partitions": app.partitions,
                "events": app.events,
                "restore_samples": app.restore_samples,
                "restore_rates": app.restore_rates,
                "noticed": app.noticed,
                "choices": app.choices,
                "commits": [[c.partition, c.seq, c.start, c.end, c.owner, c.at] for c in app.commits.commits],
            }
            for app in run.apps
        ],
    }
    series.write(path, doc)


def read(path: Path) -> dict[str, Any]:
    """A recorded run's document."""
    return series.read(path)


def load(doc: dict[str, Any]) -> tuple[Run, dict[str, Any]]:
    """The run as `dump` wrote it (apps without an API client: nothing is asked of the cluster), and
    the extra keys."""
    # a run recorded before the bench set flapWindow ran with the operator's default
    settings = Settings(**{"flap_window": None, **doc["settings"], "out": Path(doc["settings"]["out"])})
    run = Run(settings, preload_s=doc["preload_s"], fed_from=doc["fed_from"], fed_until=doc["fed_until"])
    run.failed = doc["failed"]
    run.windows = [Window(**w) for w in doc["windows"]]
    for item in doc["apps"]:
        app = BenchApp(item["protocol"], Path(item["root"]), item["partitions"], None)
        app.events = [tuple(e) for e in item["events"]]
        app.restore_samples = [tuple(s) for s in item["restore_samples"]]
        app.restore_rates = list(item.get("restore_rates") or [])
        app.noticed = [tuple(n) for n in item.get("noticed") or []]
        app.choices = [tuple(c) for c in item.get("choices") or []]
        app.commits.commits = [Commit(*c) for c in item["commits"]]
        run.apps.append(app)
    return run, {k: v for k, v in doc.items() if k not in RUN_KEYS}


def write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=1) + "\n")
