"""Everyday kubectl on StreamApps, and an HPA resolving their /scale, on the real control plane.

Every verb runs the real kubectl binary against the real API server with the generated CRDs and a
real `streamapp operator` process (member pods on kwok nodes go Ready without running, so the
operator assigns tasks and writes member specs; nothing processes records).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from operator_support import APP, Operators, app, create_app

from localcluster import build
from localcluster.waiting import wait_for
from streamapp.api.member import task_ranges
from streamapp.api.names import GROUP, MEMBERS, VERSION

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 90.0
COLUMN = r"\S+(?: \S+)*"  # kubectl pads columns with 3 spaces; a header may hold one (INPUT LAG)
APP_COLUMNS = [
    "NAME",
    "REPLICAS",
    "READY",
    "STATUS",
    "PARTITIONS",
    "WARMING",
    "UNASSIGNED",
    "GENERATION",
    "INPUT LAG",
    "AGE",
]
"""`kubectl get streamapp`'s header: the CRD's printer columns between NAME and AGE."""
MEMBER_COLUMNS = [
    "NAME",
    "APP",
    "MEMBER",
    "GENERATION",
    "OBSERVED",
    "ACTIVE",
    "REVOKING",
    "STANDBY",
    "WARMUP",
    "AGE",
]
"""`kubectl get streamappmember`'s header."""
RANGES = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


class Kubectl:
    """The cluster's kubectl in one namespace, with a discovery cache of its own (a cache from before
    the CRDs changed would resolve names and categories from stale discovery)."""

    def __init__(self, kubeconfig: Path, namespace: str, cache: Path) -> None:
        binary = build.bin_dir() / "kubectl"
        self.base = [str(binary), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), "-n", namespace]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=60)
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)} failed:\n{done.stderr}"
        return done

    def out(self, *args: str) -> str:
        return self.run(*args).stdout


@pytest.fixture
def kubectl(kubeconfig_path: Path, namespace: str, tmp_path: Path) -> Kubectl:
    if not (build.bin_dir() / "kubectl").exists():
        pytest.skip("kubectl is built with the local control plane's binaries")
    return Kubectl(kubeconfig_path, namespace, tmp_path / "kube-cache")


@pytest.fixture
def running_app(api_client: client.ApiClient, namespace: str, operators: Operators) -> dict[str, Any]:
    """An app of 2 members and 6 tasks whose member specs the operator has written."""
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=6)

    def assigned() -> dict[str, Any] | None:
        body = app(api_client, namespace)
        status = body.get("status") or {}
        return body if status.get("selector") and (status.get("tasks") or {}).get("active") == 6 else None

    return wait_for(assigned, TIMEOUT_S, "the operator to assign every task")


def rows(table: str) -> list[dict[str, str]]:
    """kubectl's table output as one dict per row, cut at the header's column starts (empty cells stay
    empty)."""
    header, *lines = table.rstrip("\n").splitlines()
    starts = [m.start() for m in re.finditer(COLUMN, header)]
    bounds = list(zip(re.findall(COLUMN, header), starts, [*starts[1:], None], strict=True))
    return [{name: line[a:b].strip() for name, a, b in bounds} for line in lines]


def header(table: str) -> list[str]:
    return re.findall(COLUMN, table.splitlines()[0])


def test_every_verb_takes_the_singular_name(kubectl: Kubectl, running_app: dict[str, Any]) -> None:
    for name in ("streamapp", "streamapps", "sapp", "streamapp.streamapp.dev"):
        got = rows(kubectl.out("get", name, APP))
        assert [r["NAME"] for r in got] == [APP], (name, got)
    table = kubectl.out("get", "streamapp")
    assert header(table) == APP_COLUMNS
    assert rows(table)[0]["PARTITIONS"] == "6"
    assert re.fullmatch(r"[A-Z][A-Za-z]+", rows(table)[0]["STATUS"]), "STATUS shows the Ready reason"
    described = kubectl.out("describe", "streamapp", APP)
    assert re.search(rf"^Name:\s+{APP}$", described, re.MULTILINE) and "Conditions:" in described
    assert kubectl.out("get", "streamapp", APP, "-o", "jsonpath={.metadata.name}") == APP


def test_get_streaming_lists_apps_and_members(kubectl: Kubectl, running_app: dict[str, Any]) -> None:
    listed = kubectl.out("get", "streaming", "-o", "name").split()
    assert f"streamapp.streamapp.dev/{APP}" in listed
    assert f"streamappmember.streamapp.dev/{APP}-0" in listed


def test_wide_member_columns_are_task_ranges(kubectl: Kubectl, running_app: dict[str, Any]) -> None:
    def table() -> str | None:
        """Both members listed and every task active somewhere. (Whether member 1 holds tasks yet
        depends on whether its pod was ready at the first plan: without executors its warmups never
        catch up, so the test does not wait for a balance that cannot come.)"""
        out = kubectl.out("get", "sam", "-o", "wide")
        found = rows(out)
        cells = [r[column] for r in found for column in ("ACTIVE", "REVOKING", "STANDBY", "WARMUP")]
        ranged = all(RANGES.match(cell) for cell in cells if cell)
        return out if len(found) == 2 and ranged and _tasks(found) == set(range(6)) else None

    out = wait_for(table, TIMEOUT_S, "both members listed with task ranges")
    assert header(out) == MEMBER_COLUMNS
    assert "{" not in out, "no raw JSON in the table"


def _tasks(found: list[dict[str, str]]) -> set[int]:
    """The tasks the ACTIVE cells name, ranges expanded."""
    tasks: set[int] = set()
    for row in found:
        for part in filter(None, row["ACTIVE"].split(",")):
            first, _, last = part.partition("-")
            tasks |= set(range(int(first), int(last or first) + 1))
    return tasks


def test_scale_and_delete_by_singular_name(
    kubectl: Kubectl, api_client: client.ApiClient, namespace: str, running_app: dict[str, Any]
) -> None:
    assert "scaled" in kubectl.out("scale", "streamapp", APP, "--replicas=3")
    assert app(api_client, namespace)["spec"]["replicas"] == 3
    wait_for(
        lambda: (app(api_client, namespace).get("status") or {}).get("replicas") == 3, TIMEOUT_S, "3 members"
    )
    assert "deleted" in kubectl.out("delete", "streamapp", APP, "--wait=false")
    gone = kubectl.run("get", "streamapp", APP, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_explain_shows_the_models_descriptions(kubectl: Kubectl, crds: None) -> None:
    def explained() -> str | None:
        done = kubectl.run("explain", "streamapp.status.inputLag", check=False)
        return done.stdout if done.returncode == 0 else None

    text = wait_for(explained, TIMEOUT_S, "the CRD's schema to be published")
    assert "Records in the source not yet processed" in text
    assert "scheduledRebalanceMaxDelay" in kubectl.out("explain", "streamapp.spec.rebalance")
    assert "activeTasks" in kubectl.out("explain", "streamappmember.spec")


def test_hpa_resolves_the_scale_subresource_and_selector(
    api_client: client.ApiClient, namespace: str, running_app: dict[str, Any]
) -> None:
    """The sample HPA as users apply it: kube-controller-manager's HPA controller reads /scale (replicas
    and the status selector). The metric needs an adapter this cluster lacks, so the HPA stops there."""
    hpa = yaml.safe_load((ROOT / "manifests" / "samples" / "hpa.yaml").read_text())
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StreamApp",
        "name": APP,
    }
    client.AutoscalingV2Api(api_client).create_namespaced_horizontal_pod_autoscaler(namespace, hpa)

    def conditions() -> dict[str, Any] | None:
        got = client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler(APP, namespace)
        found = {c.type: c for c in (got.status.conditions or [])}
        return found if "AbleToScale" in found and "ScalingActive" in found else None

    found = wait_for(conditions, TIMEOUT_S, "the HPA controller to evaluate the HPA")
    assert found["AbleToScale"].status == "True", found["AbleToScale"].message
    assert found["AbleToScale"].reason == "SucceededGetScale"
    # Scale and selector resolved; what is missing is only the metric (no custom metrics adapter here).
    assert found["ScalingActive"].reason not in ("InvalidSelector", "FailedGetScale"), found["ScalingActive"]
    assert "metric" in (found["ScalingActive"].message or "").lower(), found["ScalingActive"].message


def test_member_objects_carry_range_strings(
    api_client: client.ApiClient, namespace: str, running_app: dict[str, Any]
) -> None:
    """Every member's task sets, again as range strings beside the executor's lists. Which member
    holds the tasks depends on whose pod went Ready first (see the wide-columns test), so the test
    reads every member rather than member 0."""
    api = client.CustomObjectsApi(api_client)

    def all_active() -> list[dict[str, Any]] | None:
        specs = [
            m["spec"] for m in api.list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)["items"]
        ]
        tasks = sorted(a["task"] for spec in specs for a in spec.get("active", []))
        return specs if tasks == list(range(6)) else None

    for spec in wait_for(all_active, TIMEOUT_S, "every task active on some member"):
        assert {"activeTasks", "revokingTasks", "standbyTasks", "warmupTasks"} <= set(spec)
        assert spec["activeTasks"] == task_ranges(a["task"] for a in spec["active"])
