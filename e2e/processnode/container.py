"""One container of a process-node pod: a local process, restarted per ``restartPolicy``.

Restart back-off doubles from ``backoff_s`` up to ``max_backoff_s`` and resets after a container ran
for ten minutes, mirroring the kubelet (whose base is 10 s; the agent's default is shorter so tests
need not wait).
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from processnode import envvars, pidfiles, procfs, volumes
from processnode.probes import Prober

Json = dict[str, Any]
RESET_BACKOFF_AFTER_S = 600.0


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Runtime:
    """Node-wide settings every container process gets."""

    state_dir: Path
    path_prepend: tuple[str, ...]
    backoff_s: float
    max_backoff_s: float

    def base_env(self) -> dict[str, str]:
        """The agent's environment with the configured directories (e.g. .venv/bin) first on PATH."""
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([*self.path_prepend, env.get("PATH", os.defpath)])
        return env


@dataclass(frozen=True)
class Placement:
    """Where a container lives on this node: its default directory, its emulated mounts, its IP."""

    workdir: Path
    mounts: dict[str, Path]
    pod_ip: str


class ContainerRunner:
    """Lifecycle of one container: start, observe exit, restart, probe readiness, terminate."""

    def __init__(
        self, spec: Json, env: dict[str, str], placement: Placement, runtime: Runtime, key: str
    ) -> None:
        self.spec = spec
        self.name: str = spec["name"]
        self.placement = placement
        pod_env = {name: volumes.rewrite_env(value, placement.mounts) for name, value in env.items()}
        self.env = {**runtime.base_env(), **pod_env}
        working_dir = spec.get("workingDir")
        self.workdir = (
            Path(volumes.rewrite(working_dir, placement.mounts)) if working_dir else placement.workdir
        )
        self.runtime = runtime
        self.key = key
        self.restart_count = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = ""
        self.started_monotonic = 0.0
        self.last_termination: Json | None = None
        self.previous_termination: Json | None = None
        self.waiting_reason = "ContainerCreating"
        self.waiting_message = ""
        self.next_start = 0.0
        self.backoff = runtime.backoff_s
        self.probers: dict[str, Prober] = {}
        self._pidfile: Path | None = None
        self.exhausted = False

    @property
    def running(self) -> bool:
        return self.process is not None

    @property
    def ready(self) -> bool:
        """Ready while running and, with a readiness probe, once this instance's probe passes. A
        restarted instance is not ready before its own probe has passed, as with a kubelet: `start`
        sets the process before it makes the new probers, and a status taken in between said Ready,
        so a member whose executor had just been killed looked back before its Spark had started."""
        if self.process is None:
            return False
        readiness = self.probers.get("readiness")
        if readiness is None:
            return "readinessProbe" not in self.spec
        return readiness.passing

    @property
    def log_path(self) -> Path:
        """stdout+stderr of every run of this container, appended (what ``kubectl logs`` serves)."""
        return self.workdir / f"{self.name}.log"

    def argv(self) -> list[str]:
        """command + args, ``$(VAR)`` expanded and mount paths rewritten; there is no image entrypoint."""
        words = [*self.spec.get("command", []), *self.spec.get("args", [])]
        if not self.spec.get("command"):
            raise ValueError("the process node runs no images: the container needs an explicit command")
        return [volumes.rewrite(envvars.expand(word, self.env), self.placement.mounts) for word in words]

    def start(self) -> None:
        """Start the process in its own process group, output appended to ``<workdir>/<name>.log``."""
        try:
            argv = self.argv()
            self.workdir.mkdir(parents=True, exist_ok=True)
            log = self.log_path.open("ab")
            self.process = subprocess.Popen(
                argv,
                cwd=self.workdir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
        except (OSError, ValueError) as error:
            self.waiting_reason, self.waiting_message = "RunContainerError", str(error)
            self.exhausted = True
            return
        self.started_at, self.started_monotonic = now_rfc3339(), time.monotonic()
        self.waiting_reason = self.waiting_message = ""
        self._pidfile = pidfiles.record(
            self.runtime.state_dir, f"{self.key}-{self.restart_count}", self.process.pid
        )
        self.probers = {}
        if "readinessProbe" in self.spec:
            self.probers["readiness"] = self._prober(self.spec["readinessProbe"])
        if "livenessProbe" in self.spec:
            self.probers["liveness"] = self._prober(self.spec["livenessProbe"], self._kill_unhealthy)
        for prober in self.probers.values():
            prober.start()

    def _prober(self, probe: Json, on_failure: Callable[[], None] | None = None) -> Prober:
        return Prober(probe, self.spec, self.env, self.workdir, self.placement.pod_ip, on_failure)

    def _kill_unhealthy(self) -> None:
        """Liveness failed: kill the process; :meth:`poll` then restarts it per ``restartPolicy``."""
        self.signal(signal.SIGKILL)

    def poll(self, restart_policy: str, may_restart: bool) -> None:
        """Notice an exit and schedule a restart (after the back-off) if the policy wants one."""
        if self.process is None or self.process.poll() is None:
            return
        code = self.process.returncode
        self._record_exit(code)
        wants_restart = restart_policy == "Always" or (restart_policy == "OnFailure" and code != 0)
        if wants_restart and may_restart:
            ran_for = time.monotonic() - self.started_monotonic
            self.backoff = self.runtime.backoff_s if ran_for > RESET_BACKOFF_AFTER_S else self.backoff
            self.next_start = time.monotonic() + self.backoff
            self.backoff = min(self.backoff * 2, self.runtime.max_backoff_s)
            self.waiting_reason = "CrashLoopBackOff"
            self.waiting_message = (
                f"back-off {self.next_start - time.monotonic():.0f}s restarting failed container"
            )
        else:
            self.exhausted = True

    def restart_if_due(self) -> None:
        """Start the next instance once its back-off has elapsed."""
        if self.process is not None or self.exhausted or time.monotonic() < self.next_start:
            return
        self.restart_count += 1
        self.start()

    def _record_exit(self, code: int) -> None:
        """Turn a reaped process into ``lastState``/``state.terminated`` data."""
        assert self.process is not None
        signal_name = None
        if code < 0:
            signal_name, code = signal.Signals(-code).name, 128 - code
        self.previous_termination = self.last_termination
        self.last_termination = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.started_at,
            "finishedAt": now_rfc3339(),
            "containerID": f"process://{self.process.pid}",
        }
        if signal_name:
            self.last_termination["message"] = f"killed by {signal_name}"
        # When a container's main process ends, whatever it left running goes with it (the PID
        # namespace ends); a process group is the nearest thing here.
        procfs.signal_group(self.process.pid, signal.SIGKILL)
        self.process = None
        for prober in self.probers.values():
            prober.stop()
        self.probers = {}
        if self._pidfile is not None:
            self._pidfile.unlink(missing_ok=True)
            self._pidfile = None

    def signal(self, sig: signal.Signals) -> None:
        """Signal the container as a container runtime does: SIGTERM to its main process only (PID 1
        of a container; what it spawned, e.g. a JVM, keeps running while it shuts down gracefully),
        SIGKILL to everything in it (the command and anything it spawned)."""
        if self.process is None:
            return
        if sig == signal.SIGKILL:
            procfs.signal_group(self.process.pid, sig)
        else:
            self.process.send_signal(sig)

    def status(self, image: str) -> Json:
        """The container's entry in ``status.containerStatuses``."""
        status: Json = {
            "name": self.name,
            "image": image,
            "imageID": "",
            "ready": self.ready,
            "started": self.running,
            "restartCount": self.restart_count,
        }
        if self.process is not None:
            status["state"] = {"running": {"startedAt": self.started_at}}
            status["containerID"] = f"process://{self.process.pid}"
        elif self.exhausted and self.last_termination is not None:
            status["state"] = {"terminated": self.last_termination}
            status["containerID"] = self.last_termination["containerID"]
        else:
            waiting = {"reason": self.waiting_reason or "ContainerCreating"}
            if self.waiting_message:
                waiting["message"] = self.waiting_message
            status["state"] = {"waiting": waiting}
        previous = self.previous_termination if "terminated" in status["state"] else self.last_termination
        if previous is not None:
            status["lastState"] = {"terminated": previous}
        return status
