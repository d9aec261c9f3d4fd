"""A pod bound to the process node: its containers, its phase and conditions, its termination."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from processnode import envvars, serviceaccount, volumes
from processnode.container import ContainerRunner, Placement, Runtime, now_rfc3339
from processnode.kube import NodeClient
from processnode.loopback import PodAddresses

Json = dict[str, Any]
DEFAULT_GRACE_S = 30


class PodRunner:
    """Runs every container of one pod as a local process and derives the pod's status from them."""

    def __init__(self, pod: Json, runtime: Runtime, addresses: PodAddresses, api: NodeClient) -> None:
        meta = pod["metadata"]
        self.uid: str = meta["uid"]
        self.pod = pod
        self.addresses = addresses
        self.restart_policy: str = pod["spec"].get("restartPolicy", "Always")
        self.images = {c["name"]: c.get("image", "") for c in pod["spec"]["containers"]}
        self.start_time = now_rfc3339()
        self.transitions: dict[str, tuple[str, str]] = {}
        self.kill_at: float | None = None
        self.failure_message = ""
        workdir = runtime.state_dir / "pods" / f"{meta['namespace']}_{meta['name']}_{self.uid}"
        self.containers = self._containers(pod, runtime, workdir, api)

    def _containers(
        self, pod: Json, runtime: Runtime, workdir: Path, api: NodeClient
    ) -> list[ContainerRunner]:
        """One runner per container with its resolved env; a pod the node cannot run fails instead."""
        if pod["spec"].get("initContainers"):
            self.failure_message = "init containers are not supported by the process node"
            return []
        credentials: dict[str, str] = {}
        if serviceaccount.wants_token(pod):
            credentials = serviceaccount.write_credentials(api, pod, workdir / "serviceaccount")
        try:
            claims = volumes.claim_volumes(pod, api.read_claim, api.read_volume)
        except ValueError as error:
            self.failure_message = str(error)
            return []
        pod_volumes = {**volumes.emptydir_volumes(pod, workdir), **claims}
        runners = []
        for spec in pod["spec"]["containers"]:
            try:
                env = envvars.container_env(pod, spec, self.addresses, api.read_config_map, api.read_secret)
            except (ValueError, KeyError) as error:
                self.failure_message = f"container {spec['name']}: {error}"
                return []
            placement = Placement(workdir, volumes.mount_table(spec, pod_volumes), self.addresses.pod_ip)
            key = f"{self.uid}-{spec['name']}"
            runners.append(ContainerRunner(spec, {**credentials, **env}, placement, runtime, key))
        return runners

    def start(self) -> None:
        for container in self.containers:
            container.start()

    @property
    def terminating(self) -> bool:
        return self.kill_at is not None

    @property
    def phase(self) -> str:
        """Pending until every container started once; terminal once no container will run again."""
        if self.failure_message:
            return "Failed"
        if not all(c.running or c.last_termination is not None for c in self.containers):
            return "Pending"
        if all(c.exhausted and not c.running for c in self.containers):
            codes = [c.last_termination["exitCode"] for c in self.containers if c.last_termination]
            return "Succeeded" if all(code == 0 for code in codes) else "Failed"
        return "Running"

    def step(self) -> None:
        """Reap exits, restart what the policy restarts, escalate to SIGKILL after the grace period."""
        may_restart = not self.terminating and self.phase not in ("Succeeded", "Failed")
        for container in self.containers:
            container.poll(self.restart_policy, may_restart)
            if may_restart:
                container.restart_if_due()
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            for container in self.containers:
                container.signal(signal.SIGKILL)

    def begin_termination(self, grace_s: float | None) -> None:
        """SIGTERM every container now; :meth:`step` sends SIGKILL once the grace period is over."""
        if self.kill_at is not None:
            return
        grace = DEFAULT_GRACE_S if grace_s is None else grace_s
        self.kill_at = time.monotonic() + grace
        for container in self.containers:
            container.exhausted = True
            container.signal(signal.SIGTERM)

    @property
    def stopped(self) -> bool:
        """No process of this pod is left running."""
        return not any(c.running for c in self.containers)

    def kill_now(self) -> None:
        """The pod object vanished (force deletion): stop its processes without a grace period."""
        self.begin_termination(0)
        self.step()

    def _condition(self, kind: str, value: bool) -> Json:
        """A condition whose lastTransitionTime moves only when its status changes."""
        status = "True" if value else "False"
        previous = self.transitions.get(kind)
        if previous is None or previous[0] != status:
            self.transitions[kind] = (status, now_rfc3339())
        return {"type": kind, "status": status, "lastTransitionTime": self.transitions[kind][1]}

    def status(self, current: Json) -> Json:
        """The pod's full status, keeping the scheduler's PodScheduled condition.

        Readiness follows the probes until the containers exit, terminating or not, as a kubelet's does
        (readiness probes keep running during graceful termination, kubernetes/kubernetes#110191; an
        EndpointSlice then shows the pod `serving` and `terminating`): a pod being drained can still say
        it works."""
        ready = bool(self.containers) and all(c.ready for c in self.containers)
        conditions = [
            c for c in current.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"
        ]
        conditions += [
            self._condition("PodReadyToStartContainers", True),
            self._condition("Initialized", True),
            self._condition("ContainersReady", ready),
            self._condition("Ready", ready),
        ]
        status: Json = {
            "phase": self.phase,
            "conditions": conditions,
            "hostIP": self.addresses.node_ip,
            "hostIPs": [{"ip": self.addresses.node_ip}],
            "podIP": self.addresses.pod_ip,
            "podIPs": [{"ip": self.addresses.pod_ip}],
            "startTime": self.start_time,
            "containerStatuses": [c.status(self.images[c.name]) for c in self.containers],
        }
        if self.failure_message:
            status["reason"], status["message"] = "Unsupported", self.failure_message
        return status
