"""Process identity and signalling through /proc, robust against PID reuse and zombies."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (which may contain spaces)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process' start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def is_running(pid: int, ticks: int) -> bool:
    """True while ``pid`` is the process that started at ``ticks`` and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z" and int(fields[19]) == ticks


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the process group led by ``pid``; a group that is already gone is not an error."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return
