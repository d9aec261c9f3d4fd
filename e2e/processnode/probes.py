"""Readiness and liveness probes (exec, httpGet, tcpSocket) with the kubelet's thresholds and timing fields.

HTTP and TCP probes go to the pod's own loopback IP (see :mod:`loopback`) unless the probe names a
host, like a kubelet's go to the pod IP.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Json = dict[str, Any]


def _port(value: int | str, container: Json) -> int:
    """A probe port is a number or the name of one of the container's ports."""
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for port in container.get("ports", []):
        if port.get("name") == value:
            return int(port["containerPort"])
    raise ValueError(f"probe port {value!r} is not a named port of container {container['name']}")


def run_once(probe: Json, container: Json, env: Mapping[str, str], cwd: Path, pod_ip: str) -> bool:
    """One probe attempt; any error or timeout counts as a failure, as in the kubelet."""
    timeout = float(probe.get("timeoutSeconds", 1))
    try:
        if "exec" in probe:
            result = subprocess.run(
                probe["exec"]["command"],
                env=dict(env),
                cwd=cwd,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            return result.returncode == 0
        if "httpGet" in probe:
            get = probe["httpGet"]
            scheme = str(get.get("scheme", "HTTP")).lower()
            url = f"{scheme}://{get.get('host') or pod_ip}:{_port(get['port'], container)}{get.get('path', '/')}"
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return 200 <= int(response.status) < 400
        if "tcpSocket" in probe:
            tcp = probe["tcpSocket"]
            address = (tcp.get("host") or pod_ip, _port(tcp["port"], container))
            with socket.create_connection(address, timeout=timeout):
                return True
    except (OSError, subprocess.SubprocessError, urllib.error.URLError, ValueError):
        return False
    raise ValueError(f"unsupported probe handler in {sorted(probe)}")


class Prober:
    """Probes one running container instance on its own thread until :meth:`stop`.

    ``passing`` follows the thresholds (readiness); ``on_failure`` is called once when the probe has
    failed ``failureThreshold`` times in a row (liveness: the container gets killed and restarted).
    """

    def __init__(
        self,
        probe: Json,
        container: Json,
        env: Mapping[str, str],
        cwd: Path,
        pod_ip: str,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self.probe, self.container, self.env, self.cwd = probe, container, env, cwd
        self.pod_ip = pod_ip
        self.on_failure = on_failure
        self.passing = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"probe-{container['name']}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _loop(self) -> None:
        period = float(self.probe.get("periodSeconds", 10))
        needed_ok = int(self.probe.get("successThreshold", 1))
        needed_fail = int(self.probe.get("failureThreshold", 3))
        successes = failures = 0
        if self._stopped.wait(float(self.probe.get("initialDelaySeconds", 0))):
            return
        while not self._stopped.is_set():
            if run_once(self.probe, self.container, self.env, self.cwd, self.pod_ip):
                successes, failures = successes + 1, 0
                if successes >= needed_ok:
                    self.passing = True
            else:
                successes, failures = 0, failures + 1
                if failures >= needed_fail:
                    self.passing = False
                    if self.on_failure is not None:
                        self.on_failure()
                        return
            if self._stopped.wait(period):
                return
