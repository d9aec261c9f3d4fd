"""Start, find and stop the cluster's processes by PID, so shutdown leaves nothing behind.

Each component runs in its own session (process group), its output goes to a log file, and its record
(PID plus the kernel's start time of that PID) is kept in the cluster state so a later ``down`` from
another process stops exactly these processes and never a stranger that reused a PID.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

from processnode import procfs


@dataclass(frozen=True)
class ProcessRecord:
    """Identity of one started component: the PID and the start time that disambiguates it, and the
    command line it was started with (so a fault test can start it again after killing it)."""

    name: str
    pid: int
    start_ticks: int
    log: str
    argv: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ProcessRecord:
        argv = data.get("argv")
        return cls(
            str(data["name"]),
            int(str(data["pid"])),
            int(str(data["start_ticks"])),
            str(data["log"]),
            tuple(str(a) for a in argv) if isinstance(argv, list | tuple) else (),
        )


_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def is_alive(record: ProcessRecord) -> bool:
    """True while the recorded process (not a PID reuse, not a zombie) is still running."""
    return procfs.is_running(record.pid, record.start_ticks)


def spawn(name: str, argv: list[str], log: Path, env: Mapping[str, str] | None = None) -> ProcessRecord:
    """Start ``argv`` in a new session with stdout+stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        sink.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
        sink.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    _CHILDREN[proc.pid] = proc
    ticks = procfs.start_ticks(proc.pid)
    if ticks is None:
        raise RuntimeError(f"{name} exited immediately; see {log}")
    return ProcessRecord(name, proc.pid, ticks, str(log), tuple(argv))


def _reap(pid: int) -> None:
    """Collect the exit status of our own children so they do not linger as zombies."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]


def stop(record: ProcessRecord, grace_s: float = 10.0) -> None:
    """SIGTERM the component's process group, SIGKILL it after ``grace_s``, wait until it is gone.

    A paused (SIGSTOPped) component is continued after the SIGTERM, so that it can act on it.
    """
    if not is_alive(record):
        _reap(record.pid)
        return
    procfs.signal_group(record.pid, signal.SIGTERM)
    procfs.signal_group(record.pid, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(record.pid)
        if not is_alive(record):
            break
        time.sleep(0.05)
    procfs.signal_group(record.pid, signal.SIGKILL)
    while is_alive(record):
        _reap(record.pid)
        time.sleep(0.05)
    _reap(record.pid)


def kill(record: ProcessRecord) -> None:
    """SIGKILL the component's process group and wait until it is gone (a crash: no clean shutdown)."""
    procfs.signal_group(record.pid, signal.SIGKILL)
    while is_alive(record):
        _reap(record.pid)
        time.sleep(0.05)
    _reap(record.pid)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: each stays bound until all are chosen, since a port just released
    may be handed out again (two listeners of one process on the same port fail its start)."""
    with ExitStack() as stack:
        sockets = [
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)
        ]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def port_open(port: int) -> bool:
    """True when something accepts connections on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def http_ok(url: str) -> bool:
    """True when a plain-HTTP endpoint (a health or metrics page) answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def wait_until(
    check: Callable[[], bool], timeout_s: float, what: str, record: ProcessRecord | None = None
) -> None:
    """Poll ``check`` until it is true; on timeout (or if ``record`` died) raise with the log tail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if record is not None and not is_alive(record):
            raise RuntimeError(f"{record.name} exited while waiting for {what}:\n{log_tail(record)}")
        time.sleep(0.1)
    tail = f"\n{log_tail(record)}" if record is not None else ""
    raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}{tail}")


def log_tail(record: ProcessRecord, lines: int = 25) -> str:
    """Last lines of a component's log, for error messages that explain themselves."""
    try:
        text = Path(record.log).read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {record.log})"
    return "".join(text.splitlines(keepends=True)[-lines:])
