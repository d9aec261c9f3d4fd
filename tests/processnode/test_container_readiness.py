"""A container with a readiness probe is ready only once its own instance's probe has passed, as with a
kubelet: a container just (re)started is not ready, however its previous instance was doing.

The test drives its probe instead of racing it: the probe passes only while `ready.flag` exists and
cannot finish while `hold` exists, so "not ready yet" is checked while the new instance's probe is
known not to have completed, however slowly a loaded machine runs the test (it once ran after the
new probe had passed)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from waits import until

from processnode.container import ContainerRunner, Placement, Runtime
from processnode.probes import Prober


def test_a_restarted_container_is_not_ready_until_its_new_probe_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = Runtime(state_dir=tmp_path / "node", path_prepend=(), backoff_s=0.0, max_backoff_s=0.0)
    flag = tmp_path / "ready.flag"
    hold = tmp_path / "hold"
    command = "while [ -e hold ]; do sleep 0.05; done; test -e ready.flag"
    # a held probe must not time out (a timeout is a failure that would also make a buggy runner
    # look right): 10 minutes is longer than any wait of this test
    probe = {"exec": {"command": ["/bin/sh", "-c", command]}, "periodSeconds": 0.1, "timeoutSeconds": 600}
    spec = {"name": "main", "command": ["sleep", "1000"], "readinessProbe": probe}
    container = ContainerRunner(spec, {}, Placement(tmp_path, {}, "127.0.0.1"), runtime, "uid-ready")
    # what a status taken while start() runs says: the process is there, its probers not yet
    while_starting: list[bool] = []
    make = ContainerRunner._prober

    def watched(self: ContainerRunner, *args: object) -> Prober:
        while_starting.append(self.ready)
        return make(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ContainerRunner, "_prober", watched)
    container.start()
    assert while_starting == [False] and not container.ready
    flag.touch()
    until(lambda: container.ready, "the probe passed")
    container.signal(signal.SIGKILL)
    until(lambda: container.poll("Always", True) or container.process is None, "the exit noticed")
    assert not container.ready
    hold.touch()  # the new instance's probe cannot complete until released
    container.restart_if_due()
    assert container.process is not None and while_starting == [False, False]
    assert not container.ready, "ready before the new instance's probe passed"
    hold.unlink()
    until(lambda: container.ready, "the new instance's probe passed")
    container.exhausted = True
    container.signal(signal.SIGKILL)
    until(lambda: container.poll("Always", False) or container.process is None, "stopped")


def test_a_container_without_a_readiness_probe_is_ready_while_it_runs(tmp_path: Path) -> None:
    runtime = Runtime(state_dir=tmp_path / "node", path_prepend=(), backoff_s=0.0, max_backoff_s=0.0)
    spec = {"name": "main", "command": ["sleep", "1000"]}
    container = ContainerRunner(spec, {}, Placement(tmp_path, {}, "127.0.0.1"), runtime, "uid-plain")
    assert not container.ready
    container.start()
    assert container.ready
    container.exhausted = True
    container.signal(signal.SIGKILL)
    until(lambda: container.poll("Always", False) or container.process is None, "stopped")
    assert not container.ready
