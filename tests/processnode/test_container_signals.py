"""The process node signals a container as a container runtime does: SIGTERM to its main process only,
so what it spawned (an executor's JVM) still runs while it shuts down; what is left goes when it exits."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from waits import until

from processnode.container import ContainerRunner, Placement, Runtime

# The main process records, on SIGTERM, the state of its child (R/S running, Z dead), then exits. It
# writes child.pid only once its trap is set: the test signals as soon as the file appears.
SCRIPT = (
    "sleep 1000 & child=$!; "
    "trap 'cut -d\" \" -f3 /proc/$child/stat > term.txt; exit 0' TERM; "
    "echo $child > child.pid; "
    "while :; do sleep 0.1; done"
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}").exists() else "X"
    return state != "Z"


def test_sigterm_reaches_the_main_process_only_and_its_leftovers_die_with_it(tmp_path: Path) -> None:
    runtime = Runtime(state_dir=tmp_path / "node", path_prepend=(), backoff_s=1.0, max_backoff_s=1.0)
    spec = {"name": "main", "command": ["sh", "-c", SCRIPT]}
    container = ContainerRunner(spec, {}, Placement(tmp_path, {}, "127.0.0.1"), runtime, "uid-main")
    container.start()
    pidfile = tmp_path / "child.pid"
    until(lambda: pidfile.exists() and pidfile.read_text().strip(), "the child started")
    child = int(pidfile.read_text())
    container.exhausted = True
    container.signal(signal.SIGTERM)
    until(lambda: container.poll("Always", False) or container.process is None, "the main process exited")
    assert (tmp_path / "term.txt").read_text().strip() in ("R", "S"), "SIGTERM reached the child"
    until(lambda: not alive(child), "the child killed with its container")
