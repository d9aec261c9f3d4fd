"""One benchmark app on the cluster: a count app under one protocol, in a namespace of its own.

Everything the phases do to an app goes through the API a user has (`/scale`, patches of the spec, pod
deletion, a ResourceQuota) or is a crash (SIGKILL of the executor's process group on the process node).
Each app has its own namespace so a quota that keeps one member's pod from coming back touches no other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from clusterbench.measure import RestoreCounter, restore_counts
from clusterbench.shapedlink import ShapedServer
from demo.commits import CommitLog
from demo.driver import kill_member, restarts
from localcluster.controlplane import LocalCluster
from realapps import app_on_process_node
from s3server.server import ACCESS_KEY, REGION, SECRET_KEY
from streamapp.api.names import APPS, GROUP, MEMBERS, VERSION, selector
from streamapp.executor.io.source import FileLog
from streamapp.executor.state import s3store, snapshots
from streamapp.executor.state.layout import StateLayout

APP = "counts"
QUOTA = "no-room"
SECRET = "bench-s3"
CHOICE_EVENTS = ("WaitingForMember", "RestoringElsewhere", "RestoredElsewhere")


@dataclass
class BenchApp:
    """A protocol's app: its files, its namespace, what it committed and restored so far. Its state
    store is `root/state`, or with `s3` a bucket on that server (the executors reach it through the
    shaped link, this reads it on the direct one)."""

    protocol: str
    root: Path
    partitions: int
    api: client.ApiClient | None  # None: a run read back from its raw JSON (nothing asked of the cluster)
    s3: ShapedServer | None = None
    events: list[tuple[float, str]] = field(default_factory=list)
    restored: RestoreCounter = field(default_factory=RestoreCounter)
    restore_samples: list[tuple[float, int, int]] = field(default_factory=list)
    restore_rates: list[float] = field(default_factory=list)  # each new restoreRate a member reported
    # (time, member) when the app's status first showed a member lost (Lost or Restarting) since it was
    # last Ready: when the operator noticed a loss
    noticed: list[tuple[float, int]] = field(default_factory=list)
    # (time, reason, message) of every Event the operator posted on the app about a lost member's tasks:
    # its choice (WaitingForMember, RestoringElsewhere: with the figures) and each takeover
    # (RestoredElsewhere). Events, not the status: a choice to restore at once is shown in the status
    # for one reconcile at most (the takeover leaves nothing held), and a poll a second misses it.
    choices: list[tuple[float, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rates_seen: set[tuple[object, object]] = set()
        self._lost: set[int] = set()
        self._events_seen: set[str] = set()
        self.log = FileLog(self.root / "input")
        self.state = StateLayout(
            self.root / "state" if self.s3 is None else self._bucket(self.s3.direct.endpoint)
        )
        self.commits = CommitLog(self.state, self.partitions)

    @property
    def bucket(self) -> str:
        return f"bench-{self.protocol}"

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{APP}"

    def _bucket(self, endpoint: str) -> s3store.S3Store:
        """The app's store read through `endpoint` (the bucket made if missing)."""
        import boto3
        from botocore.config import Config

        reader = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 5}),
        )
        if self.api is not None and self.bucket not in {b["Name"] for b in reader.list_buckets()["Buckets"]}:
            reader.create_bucket(Bucket=self.bucket)
            _first_write(reader, self.bucket)
        return s3store.S3Store.from_uri(self.uri, client=reader)

    @property
    def namespace(self) -> str:
        return f"bench-{self.protocol}"

    # --- the API ---------------------------------------------------------------------------------

    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    def create(
        self,
        replicas: int,
        rebalance: dict[str, Any],
        local_store: str = "memory",
        delta_retention: str | None = None,
    ) -> None:
        """The app (its namespace exists); every member keeps its local state on a claim, in
        `local_store`; with an S3 server, the shared store is the app's bucket there; the changelog
        after a member's checkpoint, and its local copies of tasks gone, kept `delta_retention`."""
        body = app_on_process_node(APP, self.root.resolve(), self.partitions, replicas, **rebalance)
        # the executor's own report cadence, not the tests' quicker progress figures: as deployed
        del body["spec"]["executor"]["podTemplate"]["spec"]["containers"]
        body["spec"]["rebalance"]["protocol"] = self.protocol
        body["spec"]["executor"]["storage"] = {"size": "1Gi"}
        pipeline = body["spec"]["pipeline"]
        pipeline["localStore"] = local_store
        if self.s3 is not None:
            self.core().create_namespaced_secret(
                self.namespace,
                {
                    "metadata": {"name": SECRET},
                    "stringData": {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY},
                },
            )
            pipeline["stateStore"] = {
                "uri": self.uri,
                "endpoint": self.s3.shaped.endpoint,
                "region": REGION,
                "credentialsSecret": SECRET,
            }
        if delta_retention is not None:
            pipeline["stateStore"]["deltaRetention"] = delta_retention
        self.custom().create_namespaced_custom_object(GROUP, VERSION, self.namespace, APPS, body)

    def status(self) -> dict[str, Any]:
        app = self.custom().get_namespaced_custom_object(GROUP, VERSION, self.namespace, APPS, APP)
        return dict(app.get("status") or {})

    def patch(self, spec: dict[str, Any]) -> int:
        """Patch the spec; the app's new metadata.generation."""
        app = self.custom().patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, APPS, APP, {"spec": spec}
        )
        return int(app["metadata"]["generation"])

    def scale(self, replicas: int) -> None:
        """Through the /scale subresource, as `kubectl scale` and an HPA do."""
        self.custom().patch_namespaced_custom_object_scale(
            GROUP, VERSION, self.namespace, APPS, APP, {"spec": {"replicas": replicas}}
        )

    def member_reports(self) -> list[dict[str, Any]]:
        items = self.custom().list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, MEMBERS, label_selector=selector(APP)
        )["items"]
        return [dict(item.get("status") or {}) for item in items]

    def pods(self) -> list[client.V1Pod]:
        return list(self.core().list_namespaced_pod(self.namespace, label_selector=selector(APP)).items)

    # --- what is observed each poll --------------------------------------------------------------

    def poll(self) -> None:
        """Read new manifests and add what the executors report having restored, and how fast."""
        self.commits.poll()
        reports = self.member_reports()
        self.restored.observe(restore_counts(reports))
        self.restore_samples.append((time.time(), self.restored.blocking, self.restored.background))
        self._notice_losses()
        for report in reports:
            rate = report.get("restoreRate")
            key = (report.get("podUID"), rate)
            if rate and key not in self._rates_seen:
                self._rates_seen.add(key)
                self.restore_rates.append(float(rate))

    def _notice_losses(self) -> None:
        for row in self.status().get("members") or []:
            member = int(row["id"])
            lost = row.get("phase") in ("Lost", "Restarting")
            if lost and member not in self._lost:
                self.noticed.append((time.time(), member))
            if lost:
                self._lost.add(member)
            else:
                self._lost.discard(member)
        self._notice_choices()

    def _notice_choices(self) -> None:
        """Record each new Event about a lost member's tasks (`CHOICE_EVENTS`), timed when posted."""
        for event in self.core().list_namespaced_event(self.namespace).items:
            if event.reason not in CHOICE_EVENTS or event.metadata.uid in self._events_seen:
                continue
            self._events_seen.add(event.metadata.uid)
            posted = event.first_timestamp or event.event_time or event.metadata.creation_timestamp
            self.choices.append((posted.timestamp(), event.reason, event.message or ""))

    def event(self, label: str) -> None:
        self.events.append((time.time(), label))

    # --- conditions the phases wait for ----------------------------------------------------------

    def settled(self, replicas: int) -> bool:
        """`replicas` members each owning a task, nothing in flight, every pod of the current revision."""
        status = self.status()
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        active = {m["id"]: m.get("active", 0) for m in status.get("members") or []}
        tasks = status.get("tasks") or {}
        return (
            sorted(active) == list(range(replicas))
            and all(active.values())
            and conditions.get("Rebalancing") == "False"
            and not tasks.get("warming")
            and not tasks.get("reserved")
            and status.get("currentRevision") == status.get("updateRevision")
            and status.get("updatedReplicas") == replicas
        )

    def snapshotted(self, offsets: list[int]) -> bool:
        """Every task has a snapshot in the store at or past its offset in `offsets` (a restore then
        reads it, not the changelog before it)."""
        for partition, offset in enumerate(offsets):
            names = snapshots.newest_first(self.state, partition)
            try:
                if not names or snapshots.read(self.state, names[0]).head.offset < offset:
                    return False
            except FileNotFoundError:  # pruned by a newer one between the listing and the read
                return False
        return True

    def committed_since(self, moment: float) -> bool:
        """Every task committed a batch after `moment` (epoch seconds)."""
        return all(
            (at := self.commits.last_commit(p)) is not None and at > moment for p in range(self.partitions)
        )

    def observed(self, generation: int) -> bool:
        """The operator has acted on spec `generation` (its status says so)."""
        return int(self.status().get("observedGeneration") or 0) >= generation

    def caught_up_standbys(self, generation: int, lag: int) -> bool:
        """The operator has planned spec `generation`, and every standby copy it placed (the members'
        `standby` counts) reports at most `lag` records behind. The engine places standbys only under
        `streamapp`; under the other protocols there are none to wait for."""
        if not self.observed(generation):
            return False
        status = self.status()
        placed = sum(m.get("standby", 0) for m in status.get("members") or [])
        caught_up = sum(
            1
            for report in self.member_reports()
            for task in report.get("tasks") or []
            if task["role"] == "standby" and task.get("lag") is not None and task["lag"] <= lag
        )
        return caught_up >= placed

    def busiest_member(self) -> int:
        members = self.status().get("members") or []
        return int(max(members, key=lambda m: (m.get("active", 0), -m["id"]))["id"])

    def pod_restarts(self, member: int) -> int:
        return restarts(self.core().read_namespaced_pod(f"{APP}-{member}", self.namespace))

    def pod_exists(self, member: int) -> bool:
        return any(p.metadata.name == f"{APP}-{member}" for p in self.pods())

    # --- disruptions -----------------------------------------------------------------------------

    def kill(self, cluster: LocalCluster, member: int) -> None:
        """SIGKILL the member's executor (its JVM too); its pod restarts it in place."""
        kill_member(cluster, self.core().read_namespaced_pod(f"{APP}-{member}", self.namespace))

    def no_room(self) -> None:
        """A quota of the pods that exist now minus one: the next pod deleted cannot be created again,
        as when its node is gone and no other has room. Returns once the quota counts the pods (only
        then does admission enforce it)."""
        hard = len(self.pods()) - 1
        self.core().create_namespaced_resource_quota(
            self.namespace, {"metadata": {"name": QUOTA}, "spec": {"hard": {"pods": str(hard)}}}
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            quota = self.core().read_namespaced_resource_quota(QUOTA, self.namespace)
            if quota.status and quota.status.used and "pods" in quota.status.used:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{self.namespace}: quota never counted the pods")

    def lose(self, member: int) -> None:
        """Delete the member's pod at once (no grace: a node gone); its claim stays."""
        self.core().delete_namespaced_pod(f"{APP}-{member}", self.namespace, grace_period_seconds=0)

    def room_again(self) -> None:
        self.core().delete_namespaced_resource_quota(QUOTA, self.namespace)


def _first_write(reader: Any, bucket: str, timeout_s: float = 120.0) -> None:
    """Wait until a write to the new bucket goes through: the server grows volumes for a bucket's first
    write and refuses writes meanwhile (an InternalError seen here), which an executor starting then
    would take for a broken store."""
    from botocore.exceptions import ClientError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            reader.put_object(Bucket=bucket, Key="bench-ready", Body=b"ready")
            return
        except ClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
