"""The demo's story, step by step, against the real thing; everything it starts is stopped in `finally`.

1. the local control plane (started unless running), 2. the operator installed with the Helm chart,
3. a count app with two members whose PySpark executors run on the process node, input appended at a
fixed rate, 4. scale-out to three members through /scale, 5. one executor SIGKILLed (its pod restarts
it in place), 6. input stopped, everything committed; then the measured downtime per task, the
exactly-once check against a reference computed from the input, and the timeline plot.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from dataplane_checks import check_partition
from kubernetes import client, config

from chaos.faults import executor_pid
from demo import downtime, timeline
from demo.commits import CommitLog
from demo.install import Helm
from demo.view import Screen, Snapshot, render
from localcluster.controlplane import LocalCluster
from processnode import procfs
from realapps import app_on_process_node, committed_everything, feeding
from streamapp.api.names import APPS, GROUP, MEMBERS, VERSION, selector
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.layout import StateLayout

APP = "counts"
NAMESPACE = "streamapp-demo"
RELEASE_NAMESPACE = "streamapp-system"
POLL_S = 1.0


@dataclass(frozen=True)
class Settings:
    """How big and how long: `steady_s` of undisturbed processing between the steps."""

    out: Path
    partitions: int = 4
    rate: float = 100.0
    keys: int = 50
    steady_s: float = 20.0
    step_timeout_s: float = 600.0


@dataclass
class Result:
    """What the run measured (the caller decides the exit code)."""

    gaps: list[downtime.Gap] = field(default_factory=list)
    records: int = 0
    batches: int = 0
    exactly_once: str = "not checked"
    plot: Path | None = None


class Stopped(Exception):
    """SIGTERM: leave as Ctrl-C does, through every `finally`."""


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise Stopped(f"signal {signum}")


class Demo:
    """One run: the cluster, the app's files, what was seen so far, and the screen."""

    def __init__(self, settings: Settings, cluster: LocalCluster, screen: Screen) -> None:
        self.settings, self.cluster, self.screen = settings, cluster, screen
        self.began = time.monotonic()
        self.workdir = settings.out / "demo-run"
        self.log = FileLog(self.workdir / "input")
        self.state = StateLayout(self.workdir / "state")
        self.commits = CommitLog(self.state, settings.partitions)
        self.events: list[tuple[float, str]] = []
        self.lines: list[str] = []
        self.phase = "starting"
        self.api: client.ApiClient | None = None

    # --- what the screen shows -------------------------------------------------------------------

    def note(self, text: str) -> None:
        """A progress line above the table, stamped with the time since the demo began."""
        line = f"[{time.monotonic() - self.began:6.1f}s] {text}"
        self.lines.append(line)
        self.screen.say(line)

    def event(self, label: str) -> None:
        """A step of the story: marked on the plot and named in the downtime table."""
        self.events.append((time.time(), label))
        self.note(label)

    def refresh(self) -> None:
        assert self.api is not None
        self.commits.poll()
        members = self.custom().list_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, MEMBERS, label_selector=selector(APP)
        )["items"]
        pods = client.CoreV1Api(self.api).list_namespaced_pod(NAMESPACE, label_selector=selector(APP)).items
        now = time.time()
        snapshot = Snapshot(
            elapsed=time.monotonic() - self.began,
            phase=self.phase,
            partitions=self.settings.partitions,
            members=members,
            pods={p.metadata.name: pod_state(p) for p in pods},
            committed={p: self.commits.committed(p) for p in range(self.settings.partitions)},
            input_end={p: self.log.end_offset(p) for p in range(self.settings.partitions)},
            last_commit_age={
                p: (None if (at := self.commits.last_commit(p)) is None else now - at)
                for p in range(self.settings.partitions)
            },
        )
        self.screen.draw(render(snapshot, color=self.screen.tty))

    def until(self, check: Callable[[], bool], phase: str) -> None:
        """Redraw every second until `check()` holds; give up after the step timeout."""
        self.phase = phase
        deadline = time.monotonic() + self.settings.step_timeout_s
        while True:
            self.refresh()
            if check():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"gave up after {self.settings.step_timeout_s:.0f}s: {phase}")
            time.sleep(POLL_S)

    def hold(self, seconds: float, phase: str) -> None:
        """Keep watching for `seconds` with nothing done to the app."""
        end = time.monotonic() + seconds
        self.until(lambda: time.monotonic() >= end, phase)

    # --- the API ----------------------------------------------------------------------------------

    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def app_status(self) -> dict[str, Any]:
        app = self.custom().get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, APPS, APP)
        return dict(app.get("status") or {})

    def settled(self, replicas: int) -> bool:
        """`replicas` members each owning a task, not rebalancing, every task committing."""
        status = self.app_status()
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        active = {m["id"]: m.get("active", 0) for m in status.get("members") or []}
        return (
            sorted(active) == list(range(replicas))
            and all(active.values())
            and conditions.get("Rebalancing") == "False"
        )

    def member_pod(self, member: int) -> client.V1Pod:
        return client.CoreV1Api(self.api).read_namespaced_pod(f"{APP}-{member}", NAMESPACE)

    def busiest_member(self) -> int:
        status = self.app_status()
        busiest = max(status.get("members") or [], key=lambda m: (m.get("active", 0), -m["id"]))
        return int(busiest["id"])

    def committed_since(self, moment: float) -> bool:
        """Every task committed a batch after `moment` (epoch seconds)."""
        self.commits.poll()
        return all(
            (at := self.commits.last_commit(p)) is not None and at > moment
            for p in range(self.settings.partitions)
        )

    # --- the story --------------------------------------------------------------------------------

    def run(self, result: Result) -> None:
        settings = self.settings
        shutil.rmtree(self.workdir, ignore_errors=True)
        generate(self.log, GenerateSpec(partitions=settings.partitions, count=1_000, keys=settings.keys))
        body = app_on_process_node(
            APP,
            self.workdir.resolve(),
            settings.partitions,
            replicas=2,
            maxWarmupReplicas=settings.partitions,
        )
        self.custom().create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, APPS, body)
        origin = time.time()
        self.event("app created: 2 members, real PySpark executors")
        spec = GenerateSpec(
            partitions=settings.partitions, count=None, rate=settings.rate, keys=settings.keys
        )
        with feeding(self.log, spec):
            self.note(f"input flowing: {settings.rate:.0f} records/s over {settings.partitions} tasks")
            self.until(lambda: self.committed_since(origin), "2 executors starting (PySpark start-up)")
            since = time.time()
            self.hold(settings.steady_s, "steady: 2 members")

            self.event("scale 2 → 3 via /scale")
            scale(self.custom(), 3)
            self.until(lambda: self.settled(3), "scale-out: warming, then handing off")
            self.event("scale-out settled: 3 members")
            self.hold(settings.steady_s, "steady: 3 members")

            victim = self.busiest_member()
            before = restarts(self.member_pod(victim))
            killed = time.time()
            self.event(f"SIGKILL m{victim}'s executor")
            kill_member(self.cluster, self.member_pod(victim))
            self.until(
                lambda: self.committed_since(killed),
                f"m{victim}'s tasks restored elsewhere (quicker than its restart)",
            )
            self.event(f"m{victim}'s tasks committing elsewhere")
            self.until(
                lambda: restarts(self.member_pod(victim)) > before and self.settled(3),
                f"m{victim} restarting in place (PySpark start-up), then taking a task back",
            )
            self.event(f"m{victim} back, a task handed back to it")
            self.hold(settings.steady_s, "steady: 3 members")
            until = time.time()
            self.event("input stopped")
        self.until(
            lambda: committed_everything(self.state, self.log, settings.partitions),
            "committing the rest of the input",
        )
        self.commits.poll()
        result.gaps = downtime.per_task(self.commits.commits, settings.partitions, since, until)
        result.exactly_once = self.check(result)
        result.plot = timeline.plot(
            self.commits.commits, settings.partitions, self.events, origin, settings.out / "demo-timeline.png"
        )
        self.screen.keep()  # the last frame stays above the results
        self.screen.say("")
        self.screen.say(
            f"measured downtime per task: longest gap between its commits (manifest file times) from "
            f"{since - origin:.0f}s to {until - origin:.0f}s after the app was created, while input flowed:"
        )
        self.screen.say(downtime.table(result.gaps, self.events, origin))
        self.screen.say(f"exactly once: {result.exactly_once}")
        self.screen.say(f"timeline plot: {result.plot}")

    def check(self, result: Result) -> str:
        """Each task's committed history and outputs against the reference computed from the input."""
        for partition in range(self.settings.partitions):
            try:
                result.batches += check_partition(self.state, self.workdir / "outputs", self.log, partition)
            except AssertionError as error:
                return f"FAILED on task {partition}: {error}"
            result.records += self.log.end_offset(partition)
        return (
            f"ok: {result.records:,} input records, {result.batches:,} committed batches over "
            f"{self.settings.partitions} tasks; outputs and state equal the reference, nothing lost or twice"
        )

    def operator_log_tail(self) -> str:
        """The operator pod's log tail, for a failed run."""
        core = client.CoreV1Api(self.api)
        tails = []
        for pod in core.list_namespaced_pod(RELEASE_NAMESPACE).items:
            text = core.read_namespaced_pod_log(pod.metadata.name, RELEASE_NAMESPACE, tail_lines=30)
            tails.append(f"--- {pod.metadata.name} ---\n{text}")
        return "\n".join(tails)


def pod_state(pod: client.V1Pod) -> str:
    """`Running`, `Running (1 restart)`, `Pending`…: what a person wants to know about a member's pod."""
    phase = pod.status.phase or "Pending"
    if pod.metadata.deletion_timestamp:
        phase = "Terminating"
    count = restarts(pod)
    return phase + (f" ({count} restart{'s' if count != 1 else ''})" if count else "")


def restarts(pod: client.V1Pod) -> int:
    return sum(s.restart_count for s in pod.status.container_statuses or [])


def scale(custom: client.CustomObjectsApi, replicas: int) -> None:
    """Through the /scale subresource, as `kubectl scale` and an HPA do."""
    custom.patch_namespaced_custom_object_scale(
        GROUP, VERSION, NAMESPACE, APPS, APP, {"spec": {"replicas": replicas}}
    )


def kill_member(cluster: LocalCluster, pod: client.V1Pod) -> None:
    """SIGKILL the executor's process group (its JVM too), as a crash would; the pod restarts it."""
    found = executor_pid(cluster.layout.process_node, str(pod.metadata.uid))
    if found is None:
        raise RuntimeError(f"no running executor in pod {pod.metadata.name}")
    pid, ticks = found
    if procfs.is_running(pid, ticks):
        procfs.signal_group(pid, signal.SIGKILL)


def main(settings: Settings, screen: Screen) -> int:
    """Run the demo; 0 when the output is exactly once, 1 when not, 130 on Ctrl-C or SIGTERM."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _raise_stopped)
    # Ctrl-C raises KeyboardInterrupt even when started from a shell that ignores SIGINT (a script's `&`)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run(settings, screen, Result())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(settings: Settings, screen: Screen, result: Result) -> int:
    """Everything between the signal handlers: the story, then the clean-up, however it ended."""
    cluster = LocalCluster()
    demo = Demo(settings, cluster, screen)
    started_here = not cluster.is_running()
    helm: Helm | None = None
    try:
        demo.note("starting the local control plane" if started_here else "using the running control plane")
        cluster.up()
        demo.note(f"control plane up: export KUBECONFIG={cluster.kubeconfig}")
        demo.api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        client.CoreV1Api(demo.api).create_namespace({"metadata": {"name": NAMESPACE}})
        demo.note(f"installing the operator with the Helm chart into {RELEASE_NAMESPACE}")
        helm = Helm(cluster.kubeconfig)
        helm.install(RELEASE_NAMESPACE, watch=NAMESPACE)
        demo.note("operator running in-cluster (a pod on the process node, its ServiceAccount only)")
        demo.run(result)
        return 0 if result.exactly_once.startswith("ok") else 1
    except (KeyboardInterrupt, Stopped):
        screen.say("\ninterrupted: cleaning up")
        return 130
    except Exception:
        if demo.api is not None:
            try:
                screen.say(demo.operator_log_tail())
            except Exception as error:  # the API may be what failed
                screen.say(f"(no operator log: {error})")
        raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        clean_up(demo, cluster, helm, started_here)


def delete_namespaces(core: client.CoreV1Api, names: tuple[str, ...], timeout_s: float = 120.0) -> None:
    """Delete the namespaces and wait until they are gone, so a next run can create them again."""
    for name in names:
        try:
            core.delete_namespace(name)
        except client.exceptions.ApiException as error:
            if error.status != 404:
                raise
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and {n.metadata.name for n in core.list_namespace().items} & set(names):
        time.sleep(1.0)


def clean_up(demo: Demo, cluster: LocalCluster, helm: Helm | None, started_here: bool) -> None:
    """Stop what the demo started: the whole cluster if it started it, else its release and namespace."""
    try:
        if started_here:
            demo.note("stopping the control plane (and every executor and operator process)")
            cluster.down()
            demo.note("control plane stopped, no process left")
            return
        if helm is not None:
            helm.uninstall(RELEASE_NAMESPACE)
        if demo.api is not None:
            delete_namespaces(client.CoreV1Api(demo.api), (NAMESPACE, RELEASE_NAMESPACE))
        demo.note("demo release and namespaces removed; the control plane you started keeps running")
    finally:
        if helm is not None:
            shutil.rmtree(helm.home, ignore_errors=True)
        if demo.api is not None:
            demo.api.close()
