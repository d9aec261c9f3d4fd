"""The process node's main loop: level-triggered sync of the pods bound to this node.

Every ``sync_interval_s`` the agent lists its pods and, for each, starts/keeps/stops processes so they
match the pod objects, then writes back any status that changed. A pod that is being deleted gets
SIGTERM, SIGKILL after its grace period, and once its processes are gone the agent removes the object.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from processnode import logserver, volumes
from processnode.container import Runtime
from processnode.kube import NodeClient
from processnode.loopback import LoopbackPool, PodAddresses, pod_network_for
from processnode.node import LEASE_RENEW_S, STATUS_REPORT_S, NodeHeartbeat, NodeSpec
from processnode.pod import PodRunner

Json = dict[str, Any]
SHUTDOWN_GRACE_S = 5.0


# What a call to an API server that is restarting, paused or gone raises: the node keeps its pods
# running and retries, as a kubelet does (urllib3 raises MaxRetryError or ProtocolError, not OSError).
API_ERRORS = (ApiException, OSError, urllib3.exceptions.HTTPError)


class Agent:
    """Kubelet-like agent for pods whose containers are plain local processes."""

    def __init__(
        self,
        api: NodeClient,
        spec: NodeSpec,
        runtime: Runtime,
        log_tls: logserver.TlsFiles | None = None,
        sync_interval_s: float = 0.5,
    ) -> None:
        self.api = api
        self.spec = spec
        self.runtime = runtime
        self.sync_interval_s = sync_interval_s
        self.heartbeat = NodeHeartbeat(api, spec)
        self.pods: dict[str, PodRunner] = {}
        self.pod_ips = LoopbackPool(pod_network_for(str(runtime.state_dir.resolve())))
        self.reported: dict[str, str] = {}
        self.waiting: dict[str, str] = {}  # pod uid -> the unbound claim it waits for
        self.stopping = threading.Event()
        self.log_tls = log_tls

    def run(self) -> None:
        """Register, then sync until SIGTERM/SIGINT; on the way out stop every pod process."""
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        signal.signal(signal.SIGINT, lambda *_: self.stopping.set())
        if self.log_tls is not None and self.spec.kubelet_port:
            logserver.serve(self.spec.kubelet_port, self.log_tls, self.log_path)
        self.heartbeat.register()
        threading.Thread(target=self._heartbeats, name="heartbeat", daemon=True).start()
        print(f"process node {self.spec.name} registered", flush=True)
        try:
            while not self.stopping.is_set():
                self.sync_once()
                self.stopping.wait(self.sync_interval_s)
        finally:
            self._stop_all_pods()

    def log_path(self, namespace: str, pod: str, container: str) -> Path | None:
        """Log file of a container of a pod this agent runs (called from the log server's threads)."""
        for runner in list(self.pods.values()):
            meta = runner.pod["metadata"]
            if (meta["namespace"], meta["name"]) == (namespace, pod):
                for candidate in runner.containers:
                    if candidate.name == container:
                        return candidate.log_path
        return None

    def _heartbeats(self) -> None:
        last_status = time.monotonic()
        while not self.stopping.wait(LEASE_RENEW_S):
            try:
                self.heartbeat.renew_lease()
                if time.monotonic() - last_status >= STATUS_REPORT_S:
                    self.heartbeat.report_status()
                    last_status = time.monotonic()
            except API_ERRORS as error:
                print(f"heartbeat failed, retrying: {error}", flush=True)

    def sync_once(self) -> None:
        """One level-triggered pass over the pods bound to this node."""
        try:
            current = {p["metadata"]["uid"]: p for p in self.api.pods_on(self.spec.name)}
        except API_ERRORS as error:
            print(f"listing pods failed, retrying: {error}", flush=True)
            return
        for uid in list(self.pods):
            if uid not in current:
                self.pods[uid].kill_now()
                self._forget(uid)
        self.waiting = {uid: claim for uid, claim in self.waiting.items() if uid in current}
        for uid, pod in current.items():
            try:
                self._sync_pod(uid, pod)
            except Exception:  # one broken pod must not stop the node; the next pass retries it
                name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                print(f"syncing pod {name} failed:\n{traceback.format_exc()}", flush=True)

    def _sync_pod(self, uid: str, pod: Json) -> None:
        runner = self.pods.get(uid)
        deleting = pod["metadata"].get("deletionTimestamp") is not None
        if runner is None:
            if deleting or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                self._finish_foreign(pod, deleting)
                return
            if self._waits_for_claim(uid, pod):
                return
            addresses = PodAddresses(self.pod_ips.acquire(uid), self.spec.ip)
            runner = PodRunner(pod, self.runtime, addresses, self.api)
            self.pods[uid] = runner
            runner.start()
        if deleting:
            runner.begin_termination(pod["metadata"].get("deletionGracePeriodSeconds"))
        runner.step()
        self._report(uid, pod, runner)
        if deleting and runner.stopped:
            self.api.delete_pod_now(pod)
            self._forget(uid)

    def _waits_for_claim(self, uid: str, pod: Json) -> bool:
        """True while a claim of the pod is not bound: the pod stays Pending (logged once per claim)."""
        claim = volumes.unbound_claim(pod, self.api.read_claim)
        if claim is None:
            self.waiting.pop(uid, None)
            return False
        if self.waiting.get(uid) != claim:
            self.waiting[uid] = claim
            name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            print(f"pod {name} waits for claim {claim} to be bound", flush=True)
        return True

    def _forget(self, uid: str) -> None:
        """Drop a pod whose processes are gone, returning its IP to the pool."""
        del self.pods[uid]
        self.reported.pop(uid, None)
        self.pod_ips.release(uid)

    def _finish_foreign(self, pod: Json, deleting: bool) -> None:
        """A pod this agent never ran (e.g. from before a restart): nothing to stop, just let it go."""
        if deleting:
            self.api.delete_pod_now(pod)

    def _report(self, uid: str, pod: Json, runner: PodRunner) -> None:
        """Patch the status only when it differs from what this agent last wrote."""
        status = runner.status(pod)
        fingerprint = json.dumps(status, sort_keys=True)
        if self.reported.get(uid) != fingerprint:
            self.api.patch_pod_status(pod, status)
            self.reported[uid] = fingerprint

    def _stop_all_pods(self) -> None:
        """Agent shutdown: SIGTERM every pod process, SIGKILL after a short grace. Pods stay in the API."""
        for runner in self.pods.values():
            runner.begin_termination(SHUTDOWN_GRACE_S)
        deadline = time.monotonic() + SHUTDOWN_GRACE_S + 2
        while any(not r.stopped for r in self.pods.values()) and time.monotonic() < deadline:
            for runner in self.pods.values():
                runner.step()
            time.sleep(0.05)
