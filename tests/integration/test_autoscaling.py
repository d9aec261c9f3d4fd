"""Autoscaling end to end: input lag drives a real HPA through KEDA and scales real executors out and in.

Every link is the real one a user runs: the operator exports `streamapp_input_lag_records`; a real
Prometheus scrapes it with the job the chart's own ServiceMonitor describes (honorLabels, so the
series keeps the app's `namespace` label); KEDA's operator and metrics adapter serve the sample
ScaledObject's query (`manifests/samples/keda-prometheus/scaledobject.yaml`, pointed at this namespace and this
Prometheus) as an external metric through the API server's aggregation layer; the
controller-manager's HPA, which KEDA creates, writes the StreamApp's `/scale`; the operator moves
tasks to the new members with warmups and drains them back on scale-in. Members are real PySpark
executors on the process node.

The test writes input and nothing else: it never touches `spec.replicas`. Input flows until the HPA has
scaled the app to its maximum and the app is balanced there, then stops; the lag falls to nothing and
the HPA scales the app back to its minimum. The scale-down stabilization window is shortened from the
sample's 10 minutes, and the HPA may scale down all at once. Output is checked exactly once against
the input afterwards, and the shipped alerts and dashboard queries are evaluated in that Prometheus.

From zero: the Kafka sample (`keda-kafka/scaledobject.yaml`) drives a Kafka app through KEDA's Kafka
scaler on the consumer group its executors commit their positions to, which keeps its lag while no
member runs; the Prometheus sample cannot, since with no member the operator has no lag to export.

The operator runs as a process with the admin kubeconfig (its ServiceAccount's rights are checked by
the chart's test, tests/integration/test_helm.py): the process node's loopback pod addresses get no
endpoints, so Prometheus could not find the chart's operator pods through their Service.
"""

from __future__ import annotations

import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from dataplane_checks import check_partition
from kubernetes import client
from operator_support import APP, Operators, app

from kafkabroker import records
from localcluster import processes
from localcluster.waiting import wait_for
from promtool import server
from realapps import app_on_process_node, committed_everything, feeding
from streamapp.api.names import APPS, GROUP, MEMBERS, VERSION, consumer_group, selector
from streamapp.executor.io.generate import GenerateSpec, generate
from streamapp.executor.io.kafkaclient import KafkaEndpoint, ensure_topic
from streamapp.executor.io.kafkasource import KafkaSource
from streamapp.executor.io.source import FileLog
from streamapp.executor.state.history import accepted_manifests
from streamapp.executor.state.layout import StateLayout
from streamapp.render import alerts, dashboard
from streamapp.render.monitoring import prometheus_rule

# make test-autoscaling runs these; make test leaves them out (TEST_MARKS) with the builds they need
pytestmark = pytest.mark.autoscaling

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "streamapp-operator"
SAMPLE = REPO / "manifests" / "samples" / "keda-prometheus" / "scaledobject.yaml"
PARTITIONS = 6
MIN_REPLICAS, MAX_REPLICAS = 1, 3
RATE = 600.0  # records per second over all partitions: lag of hundreds between batches
THRESHOLD = 50  # records of lag per member: any lag that flowing input leaves asks for the maximum
SCRAPE_INTERVAL = "2s"
STEP_TIMEOUT_S = 420.0
KEDA_GROUP, KEDA_VERSION, SCALED_OBJECTS = "keda.sh", "v1alpha1", "scaledobjects"


def service_monitor(helm: list[str]) -> dict[str, Any]:
    """The chart's ServiceMonitor as `helm template` renders it with monitoring on."""
    rendered = subprocess.run(
        [
            *helm,
            "template",
            "streamapp",
            str(CHART),
            "--set",
            "metrics.serviceMonitor.enabled=true",
            "--set",
            f"metrics.serviceMonitor.interval={SCRAPE_INTERVAL}",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "ServiceMonitor")


def scaled_object(namespace: str, prometheus_url: str) -> dict[str, Any]:
    """The sample ScaledObject, aimed at this namespace's app and this Prometheus, with the test's
    bounds, threshold and a short scale-down window (the sample waits 10 minutes and removes one
    member per 5)."""
    body: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    trigger = body["spec"]["triggers"][0]
    assert trigger["type"] == "prometheus" and 'namespace="default"' in trigger["metadata"]["query"]
    trigger["metadata"]["serverAddress"] = prometheus_url
    trigger["metadata"]["query"] = trigger["metadata"]["query"].replace(
        'namespace="default"', f'namespace="{namespace}"'
    )
    trigger["metadata"]["threshold"] = str(THRESHOLD)
    body["spec"].update(minReplicaCount=MIN_REPLICAS, maxReplicaCount=MAX_REPLICAS, pollingInterval=5)
    body["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"] = {
        "stabilizationWindowSeconds": 20,
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
    }
    return body


class Observed:
    """What the test reads from the API server: the app, its members' reports, the HPA's rescales."""

    def __init__(self, api: client.ApiClient, namespace: str, partitions: int = PARTITIONS) -> None:
        self.api, self.namespace, self.partitions = api, namespace, partitions

    def replicas(self) -> int:
        """The app's spec.replicas, as the autoscaler last wrote it."""
        return int(app(self.api, self.namespace)["spec"]["replicas"])

    def pods(self) -> list[str]:
        """The app's member pods (terminating ones too)."""
        pods = client.CoreV1Api(self.api).list_namespaced_pod(self.namespace, label_selector=selector(APP))
        return [p.metadata.name for p in pods.items]

    def balanced_on(self, replicas: int) -> bool:
        """spec.replicas is ``replicas`` (the HPA's doing), Ready, not rebalancing, every task active on
        exactly one of that many members, spread ≤ 1."""
        body = app(self.api, self.namespace)
        status = body.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        active = self.active_tasks()
        per_member = Counter(active.values())
        return (
            body["spec"]["replicas"] == replicas
            and conditions.get("Ready") == "True"
            and conditions.get("Rebalancing") == "False"
            and sorted(active) == list(range(self.partitions))
            and len(per_member) == replicas
            and max(per_member.values()) - min(per_member.values()) <= 1
        )

    def active_tasks(self) -> dict[int, str]:
        """task → the member reporting it active (from its current pod's report)."""
        return {task: member for task, (member, _) in self.active_reports().items()}

    def active_reports(self) -> dict[int, tuple[str, dict[str, Any]]]:
        """task → the member reporting it active and that report (from its current pod)."""
        listed = client.CustomObjectsApi(self.api).list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, MEMBERS, label_selector=selector(APP)
        )
        pods = client.CoreV1Api(self.api).list_namespaced_pod(self.namespace, label_selector=selector(APP))
        live = {p.metadata.name: p.metadata.uid for p in pods.items if p.metadata.deletion_timestamp is None}
        owners: dict[int, tuple[str, dict[str, Any]]] = {}
        for member in listed["items"]:
            name, status = member["metadata"]["name"], member.get("status") or {}
            if live.get(name) is None or status.get("podUID") != live[name]:
                continue
            for task in status.get("tasks") or []:
                if task.get("role") == "active" and task.get("fencedBy") is None:
                    owners[int(task["task"])] = (name, task)
        return owners

    def rescales(self) -> list[str]:
        """The messages of the HPA's SuccessfulRescale events, e.g. "New size: 3; reason: ..."."""
        events = client.CoreV1Api(self.api).list_namespaced_event(
            self.namespace, field_selector="reason=SuccessfulRescale"
        )
        return [e.message for e in events.items]


def check_alerts_and_dashboard(prom: server.Prometheus, namespace: str) -> None:
    """The shipped alerts, loaded into this Prometheus, all evaluate without error on the live series;
    every dashboard query, for this app, evaluates; and the lag panel's finds the app."""
    names = {alert.name for alert in alerts.alerts()}

    def evaluated() -> list[dict[str, Any]] | None:
        loaded = [r for r in prom.rules() if r.get("name") in names]
        return (
            loaded
            if {r["name"] for r in loaded} == names and all(r["health"] == "ok" for r in loaded)
            else None
        )

    wait_for(evaluated, 60, "every shipped alert loaded and evaluated without error")
    for query in dashboard.queries():
        prom.query(query.replace("$namespace", namespace).replace("$app", APP))
    lag = next(q for q in dashboard.queries() if q.startswith("streamapp_input_lag_records"))
    assert prom.query(lag.replace("$namespace", namespace).replace("$app", APP)), lag


@contextmanager
def scaling(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> Iterator[None]:
    """The ScaledObject in place for the block; deleted while KEDA still runs, since its finalizer
    (KEDA's) would otherwise hold the namespace in Terminating."""
    custom = client.CustomObjectsApi(api)
    name = body["metadata"]["name"]
    custom.create_namespaced_custom_object(KEDA_GROUP, KEDA_VERSION, namespace, SCALED_OBJECTS, body)
    try:
        yield
    finally:
        custom.delete_namespaced_custom_object(KEDA_GROUP, KEDA_VERSION, namespace, SCALED_OBJECTS, name)

        def gone() -> bool:
            listed = custom.list_namespaced_custom_object(KEDA_GROUP, KEDA_VERSION, namespace, SCALED_OBJECTS)
            return not listed["items"]

        wait_for(gone, 60, "the ScaledObject deleted")


@pytest.mark.timeout(1500)
def test_input_lag_scales_real_executors_out_and_in_through_keda_and_the_hpa(
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    process_node: str,
    helm: list[str],
    prometheus: Path,
    keda: None,
    tmp_path: Path,
) -> None:
    metrics_port = processes.free_port()
    operators.start(metrics_port=metrics_port)
    job = server.scrape_job(service_monitor(helm), f"127.0.0.1:{metrics_port}")
    assert job["honor_labels"] is True  # else the series' namespace label becomes exported_namespace
    log = FileLog(tmp_path / "input")
    state = StateLayout(tmp_path / "state")
    generate(log, GenerateSpec(partitions=PARTITIONS, count=3_000, keys=5_000, seed=1))
    observed = Observed(api_client, namespace)
    custom = client.CustomObjectsApi(api_client)
    with server.running(tmp_path / "prometheus", [job], prometheus_rule()["spec"]) as prom:
        body = app_on_process_node(APP, tmp_path, PARTITIONS, replicas=MIN_REPLICAS)
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
        wait_for(lambda: committed_everything(state, log, PARTITIONS), STEP_TIMEOUT_S, "the app processing")
        with scaling(api_client, namespace, scaled_object(namespace, prom.url)):
            flowing = GenerateSpec(partitions=PARTITIONS, count=None, rate=RATE, keys=5_000, seed=7)
            with feeding(log, flowing):
                series = wait_for(
                    lambda: prom.query(f'streamapp_input_lag_records{{namespace="{namespace}",app="{APP}"}}'),
                    STEP_TIMEOUT_S,
                    "the lag series in Prometheus under the app's own namespace label",
                )
                assert series[0]["metric"]["namespace"] == namespace
                wait_for(
                    lambda: observed.balanced_on(MAX_REPLICAS),
                    STEP_TIMEOUT_S,
                    f"the HPA scaling the app out to {MAX_REPLICAS}, balanced there",
                )
                # The tasks the new members took were warmed there: restored in the background
                # before the handoff, not while standing still.
                moved = {t: r for t, (m, r) in observed.active_reports().items() if m != f"{APP}-0"}
                assert moved and all(int(r.get("restoredBackground") or 0) > 0 for r in moved.values()), moved
            wait_for(
                lambda: observed.balanced_on(MIN_REPLICAS),
                STEP_TIMEOUT_S,
                f"the HPA scaling the app back in to {MIN_REPLICAS} once the lag is gone",
            )
        wait_for(lambda: committed_everything(state, log, PARTITIONS), STEP_TIMEOUT_S, "all input committed")
        check_alerts_and_dashboard(prom, namespace)
    rescales = observed.rescales()
    print("\n".join(["the HPA's rescales:", *rescales]))
    assert any(f"New size: {MAX_REPLICAS}" in m for m in rescales), rescales
    assert any(f"New size: {MIN_REPLICAS}" in m for m in rescales), rescales
    for partition in range(PARTITIONS):
        check_partition(state, tmp_path / "outputs", log, partition)


KAFKA_SAMPLE = REPO / "manifests" / "samples" / "keda-kafka" / "scaledobject.yaml"
KAFKA_PARTITIONS = 2
KAFKA_KEYS, KAFKA_SEED = 200, 3


def kafka_scaled_object(bootstrap: str, group: str, topic: str) -> dict[str, Any]:
    """The Kafka sample ScaledObject for this app, broker and topic: to zero after a short cooldown
    when the group has no lag, and back from zero when it has."""
    body: dict[str, Any] = yaml.safe_load(KAFKA_SAMPLE.read_text())
    body["metadata"]["name"] = APP
    body["spec"]["scaleTargetRef"]["name"] = APP
    trigger = body["spec"]["triggers"][0]
    assert trigger["type"] == "kafka" and trigger["metadata"]["consumerGroup"].startswith("streamapp.")
    trigger["metadata"].update(
        bootstrapServers=bootstrap, consumerGroup=group, topic=topic, lagThreshold="50"
    )
    body["spec"].update(
        minReplicaCount=0, maxReplicaCount=KAFKA_PARTITIONS, pollingInterval=5, cooldownPeriod=10
    )
    return body


@pytest.mark.timeout(1200)
def test_a_kafka_app_scaled_to_zero_comes_back_when_its_consumer_group_lags(
    api_client: client.ApiClient,
    namespace: str,
    operators: Operators,
    process_node: str,
    kafka_bootstrap: str,
    keda: None,
    tmp_path: Path,
) -> None:
    """KEDA's Kafka scaler reads the lag of the consumer group the executors commit their positions to:
    with no lag it scales the app to zero members (nothing reports then, so an operator metric would
    have nothing to say); new input makes the group lag, and KEDA brings the app back, which processes
    it."""
    topic = f"clicks-{uuid.uuid4().hex[:8]}"
    ensure_topic(KafkaEndpoint(kafka_bootstrap, topic), KAFKA_PARTITIONS)
    source = KafkaSource(KafkaEndpoint(kafka_bootstrap, topic))
    state = StateLayout(tmp_path / "state")
    records.produce(kafka_bootstrap, topic, KAFKA_PARTITIONS, KAFKA_SEED, 0, 500, KAFKA_KEYS)
    operators.start()
    body = app_on_process_node(APP, tmp_path, KAFKA_PARTITIONS, replicas=1)
    body["spec"]["pipeline"]["source"] = {
        "type": "kafka",
        "kafka": {"bootstrapServers": kafka_bootstrap, "topic": topic},
    }
    custom = client.CustomObjectsApi(api_client)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    wait_for(lambda: committed_to_the_end(state, source), STEP_TIMEOUT_S, "the first input committed")
    observed = Observed(api_client, namespace, KAFKA_PARTITIONS)
    group = consumer_group(namespace, APP)
    with scaling(api_client, namespace, kafka_scaled_object(kafka_bootstrap, group, topic)):
        wait_for(
            lambda: observed.replicas() == 0 and not observed.pods(), STEP_TIMEOUT_S, "KEDA scaling to zero"
        )
        records.produce(kafka_bootstrap, topic, KAFKA_PARTITIONS, KAFKA_SEED, 500, 2_000, KAFKA_KEYS)
        wait_for(
            lambda: observed.replicas() > 0, STEP_TIMEOUT_S, "KEDA scaling up from zero on the group's lag"
        )
        wait_for(lambda: committed_to_the_end(state, source), STEP_TIMEOUT_S, "the new input committed")


def committed_to_the_end(state: StateLayout, source: KafkaSource) -> bool:
    """Every task's accepted batches reach its partition's end offset on the broker now."""
    for partition in range(KAFKA_PARTITIONS):
        ends = [m.end for m in accepted_manifests(state, partition)]
        if not ends or ends[-1] != source.end_offset(partition):
            return False
    return True
