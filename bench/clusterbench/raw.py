"""A run's raw observations as JSON, written before anything is derived from them, so the analysis,
the report and the simulator comparison can be done again without running the cluster again."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clusterbench.apps import BenchApp
from clusterbench.runner import Run, Settings, Window
from demo.commits import Commit


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
                "commits": [[c.partition, c.seq, c.start, c.end, c.owner, c.at] for c in app.commits.commits],
            }
            for app in run.apps
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def load(path: Path) -> tuple[Run, dict[str, Any]]:
    """The run as `dump` wrote it (apps without an API client: nothing is asked of the cluster), and
    the extra keys."""
    doc = json.loads(path.read_text())
    settings = Settings(**{**doc["settings"], "out": Path(doc["settings"]["out"])})
    run = Run(settings, preload_s=doc["preload_s"], fed_from=doc["fed_from"], fed_until=doc["fed_until"])
    run.failed = doc["failed"]
    run.windows = [Window(**w) for w in doc["windows"]]
    for item in doc["apps"]:
        app = BenchApp(item["protocol"], Path(item["root"]), item["partitions"], None)
        app.events = [tuple(e) for e in item["events"]]
        app.restore_samples = [tuple(s) for s in item["restore_samples"]]
        app.commits.commits = [Commit(*c) for c in item["commits"]]
        run.apps.append(app)
    extra = {
        k: v
        for k, v in doc.items()
        if k not in {"settings", "preload_s", "fed_from", "fed_until", "failed", "windows", "apps"}
    }
    return run, extra
