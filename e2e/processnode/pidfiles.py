"""On-disk records of running pod processes, so nothing outlives the node even if the agent is killed.

The agent writes one file per container process and removes it when the process is reaped; ``cluster
down`` calls :func:`stop_all` after stopping the agent, which kills any group still recorded.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from processnode import procfs


def directory(state_dir: Path) -> Path:
    return state_dir / "pids"


def record(state_dir: Path, key: str, pid: int) -> Path:
    """Remember a started container process (``key`` must be unique per container instance)."""
    path = directory(state_dir) / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": pid, "start_ticks": procfs.start_ticks(pid)}))
    return path


def stop_all(state_dir: Path, grace_s: float = 3.0) -> None:
    """SIGTERM every recorded, still-running process group, SIGKILL stragglers, drop the records."""
    entries = []
    for path in sorted(directory(state_dir).glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("start_ticks") is not None and procfs.is_running(data["pid"], data["start_ticks"]):
            entries.append((int(data["pid"]), int(data["start_ticks"])))
        path.unlink(missing_ok=True)
    for pid, _ in entries:
        procfs.signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(procfs.is_running(p, t) for p, t in entries):
        time.sleep(0.05)
    for pid, ticks in entries:
        if procfs.is_running(pid, ticks):
            procfs.signal_group(pid, signal.SIGKILL)
