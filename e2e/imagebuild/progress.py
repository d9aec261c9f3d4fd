"""Run a long build step with its output in a log file and a progress line every few seconds.

mmdebstrap and ``podman build`` run for minutes and print hundreds of lines; the terminal gets one line
per interval (elapsed time and the step's latest output line) and the full output stays in the log,
whose tail is raised with the error when the step fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

PROGRESS_INTERVAL_S = 15.0
TAIL_LINES = 40


def say(message: str) -> None:
    """One progress line, flushed at once (the callers are long-running and often piped)."""
    print(f"[image] {message}", file=sys.stderr, flush=True)


def _last_line(log: Path) -> str:
    with log.open("rb") as handle:
        handle.seek(max(0, log.stat().st_size - 4096))
        lines = [line.strip() for line in handle.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1][:150] if lines else ""


def run_logged(
    name: str, command: Sequence[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> float:
    """Run ``command`` appending its output to ``log``; returns seconds; raises with the log tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(command)}\n")
        sink.flush()
        process = subprocess.Popen(
            list(command), stdout=sink, stderr=subprocess.STDOUT, env=env or dict(os.environ), cwd=cwd
        )
        try:
            while True:
                try:
                    process.wait(timeout=PROGRESS_INTERVAL_S)
                    break
                except subprocess.TimeoutExpired:
                    say(f"{name}: {time.monotonic() - started:.0f}s  {_last_line(log)}")
        except BaseException:
            process.terminate()
            process.wait()
            raise
    seconds = time.monotonic() - started
    if process.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-TAIL_LINES:])
        raise RuntimeError(f"{name} failed (exit {process.returncode}); full log {log}:\n{tail}")
    say(f"{name}: done in {seconds:.0f}s")
    return seconds
