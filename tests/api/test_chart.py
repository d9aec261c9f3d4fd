"""The Helm chart: committed files equal the generator's output, and a real helm lints and renders it
with several value sets (no cluster: `helm template` renders against helm's built-in capabilities)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helmtool import build as helmbuild
from streamapp.api import alerts, dashboard, manifests
from streamapp.api.chart import (
    chart_files,
    cluster_scoped_rules,
    crd_upgrade_rules,
    namespaced_rules,
)
from streamapp.api.crd import crd_files
from streamapp.api.names import APP_LABEL
from streamapp.api.rbac import covers, operator_cluster_role_rules, operator_lease_rules

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "streamapp-operator"
RELEASE, NAMESPACE = "sa", "streamapp-system"
FULLNAME = "sa-streamapp-operator"
GLOBAL_NAME = f"{NAMESPACE}-{FULLNAME}"

Objects = list[dict[str, Any]]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The pinned helm (built once from Go modules, then cached), with its state in a temp dir."""
    helmbuild.ensure_built()
    home = tmp_path_factory.mktemp("helm-home")
    saved = {key: os.environ.get(key) for key in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}
    for key in saved:
        os.environ[key] = str(home / key.lower())
    yield [str(helmbuild.helm_path())]
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def run_helm(helm: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*helm, *args], capture_output=True, text=True, timeout=120)


def template(helm: list[str], values: dict[str, Any] | None, tmp_path: Path) -> Objects:
    """`helm template` with `values` (as a values file), parsed; fails the test with helm's error."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values or {}))
    result = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(path))
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def one(objects: Objects, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name}: {[o['metadata']['name'] for o in found]}"
    return found[0]


def kinds(objects: Objects) -> list[str]:
    return sorted(o["kind"] for o in objects)


def container(objects: Objects) -> dict[str, Any]:
    containers: list[dict[str, Any]] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return containers[0]


def test_committed_chart_matches_the_model() -> None:
    generated = chart_files()
    for name, text in generated.items():
        path = CHART / name
        assert path.exists(), f"{path} is missing: run `make crds`"
        assert path.read_text() == text, f"{path} drifted from operator/streamapp/api: run `make crds`"
    committed = {str(p.relative_to(CHART)) for p in CHART.rglob("*") if p.is_file()}
    assert committed == set(generated), "files in the chart that the generator does not write"


def test_chart_crds_are_the_crds() -> None:
    chart = chart_files()
    crds = {name: text for name, text in crd_files().items() if name != "kustomization.yaml"}
    assert {f"crds/{name}": text for name, text in crds.items()} == {
        name: text for name, text in chart.items() if name.startswith("crds/")
    }


def test_lint(helm: list[str]) -> None:
    result = run_helm(helm, "lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr
    watched = run_helm(helm, "lint", "--strict", str(CHART), "--set", "watchNamespaces={a,b}")
    assert watched.returncode == 0, watched.stdout + watched.stderr


def test_helm_version_is_the_pinned_release(helm: list[str]) -> None:
    result = run_helm(helm, "version", "--short")
    assert result.stdout.startswith(helmbuild.HELM_VERSION + "+") or result.stdout.strip() == (
        helmbuild.HELM_VERSION
    ), result.stdout


def test_defaults_watch_every_namespace_behind_a_lease(helm: list[str], tmp_path: Path) -> None:
    objects = template(helm, None, tmp_path)
    assert kinds(objects) == [
        "ClusterRole",
        "ClusterRole",
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "FlowSchema",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    deployment = one(objects, "Deployment", FULLNAME)
    assert deployment["spec"]["replicas"] == 2
    operator = container(objects)
    assert operator["image"] == "streamapp:0.1.0"
    assert operator["command"] == ["streamapp", "operator"]
    assert operator["args"] == [
        "--all-namespaces",
        "--metrics-port",
        "8080",
        "--metrics-address",
        "$(POD_IP)",
        "--lease-name",
        FULLNAME,
    ]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in operator["env"]}
    assert env == {
        "POD_NAME": "metadata.name",
        "POD_NAMESPACE": "metadata.namespace",
        "POD_IP": "status.podIP",
    }
    # Same hardening and resources as the kustomize install.
    reference = manifests.deployment()["spec"]["template"]["spec"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == reference["securityContext"]
    assert operator["securityContext"] == reference["containers"][0]["securityContext"]
    assert operator["resources"] == reference["containers"][0]["resources"]
    assert pod["serviceAccountName"] == FULLNAME
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert (
        anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == deployment["spec"]["selector"]["matchLabels"]
    )

    cluster_role = one(objects, "ClusterRole", GLOBAL_NAME)
    assert cluster_role["rules"] == operator_cluster_role_rules()
    binding = one(objects, "ClusterRoleBinding", GLOBAL_NAME)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}]
    lease = one(objects, "Role", f"{FULLNAME}-leader-election")
    assert lease["metadata"]["namespace"] == NAMESPACE
    assert lease["rules"] == operator_lease_rules()
    service = one(objects, "Service")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics"}]


def test_watch_namespaces_get_a_role_each(helm: list[str], tmp_path: Path) -> None:
    objects = template(helm, {"watchNamespaces": ["team-a", "team-b"]}, tmp_path)
    assert container(objects)["args"][:4] == ["--namespace", "team-a", "--namespace", "team-b"]
    assert "--all-namespaces" not in container(objects)["args"]
    roles = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "Role"}
    assert set(roles) == {"team-a", "team-b", NAMESPACE}
    for watched in ("team-a", "team-b"):
        assert roles[watched]["metadata"]["name"] == GLOBAL_NAME
        assert roles[watched]["rules"] == namespaced_rules()
        binding = next(
            o for o in objects if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == watched
        )
        assert binding["roleRef"]["name"] == GLOBAL_NAME
        assert binding["subjects"][0]["namespace"] == NAMESPACE
    cluster_rules = one(objects, "ClusterRole", GLOBAL_NAME)["rules"]
    assert cluster_rules == cluster_scoped_rules()
    resources = {r for rule in cluster_rules for r in rule["resources"]}
    assert resources == {"nodes", "namespaces", "customresourcedefinitions"}
    # Together the Role and the small ClusterRole grant everything the all-namespaces ClusterRole does.
    granted = [*namespaced_rules(), *cluster_rules]
    assert all(covers(granted, rule) for rule in operator_cluster_role_rules())


def test_leader_election_off_needs_one_replica(helm: list[str], tmp_path: Path) -> None:
    objects = template(helm, {"replicaCount": 1, "leaderElection": {"enabled": False}}, tmp_path)
    assert one(objects, "Deployment")["spec"]["replicas"] == 1
    args = container(objects)["args"]
    assert "--no-leader-election" in args
    assert "--lease-name" not in args
    assert not [o for o in objects if o["kind"] == "Role"]  # no Lease rights needed
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({"leaderElection": {"enabled": False}}))
    refused = run_helm(helm, "template", RELEASE, str(CHART), "-f", str(path))
    assert refused.returncode != 0
    assert "set replicaCount to 1" in refused.stderr


def test_service_monitor(helm: list[str], tmp_path: Path) -> None:
    values = {"metrics": {"serviceMonitor": {"enabled": True, "interval": "15s", "labels": {"team": "x"}}}}
    objects = template(helm, values, tmp_path)
    monitor = one(objects, "ServiceMonitor", FULLNAME)
    assert monitor["metadata"]["labels"]["team"] == "x"
    # honorLabels keeps the series' own namespace label (else renamed exported_namespace, and the
    # autoscaler samples' {namespace=...} query finds nothing)
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "interval": "15s", "honorLabels": True}]
    service_labels = one(objects, "Service")["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
    assert "PodMonitor" not in kinds(objects)


def test_the_executors_pod_monitor_selects_every_member_pod(helm: list[str], tmp_path: Path) -> None:
    from streamapp.api.names import EXECUTOR_PORT_NAME, member_labels

    values = {"metrics": {"podMonitor": {"enabled": True}}, "watchNamespaces": ["team-a"]}
    monitor = one(template(helm, values, tmp_path), "PodMonitor", f"{FULLNAME}-executors")
    selector = monitor["spec"]["selector"]
    labels = member_labels("counts", 3)
    assert selector["matchLabels"].items() <= labels.items()
    assert all(expression["key"] in labels for expression in selector["matchExpressions"])
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == EXECUTOR_PORT_NAME
    assert monitor["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    (relabel,) = monitor["spec"]["podMetricsEndpoints"][0]["relabelings"]
    pod_label = "__meta_kubernetes_pod_label_" + APP_LABEL.replace(".", "_").replace("/", "_")
    assert relabel == {"sourceLabels": [pod_label], "targetLabel": "app"}, "executors' series carry the app"


def test_alerts_and_dashboard_render_with_their_values(helm: list[str], tmp_path: Path) -> None:
    assert not any(o["kind"] in ("PrometheusRule", "ConfigMap") for o in template(helm, None, tmp_path))
    values = {
        "metrics": {
            "prometheusRule": {"enabled": True, "labels": {"release": "kps"}, "inputLagRecords": 5000},
            "grafanaDashboard": {"enabled": True},
        }
    }
    objects = template(helm, values, tmp_path)
    rule = one(objects, "PrometheusRule", FULLNAME)
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert rule["spec"]["groups"] == alerts.rule_groups(lag_records=5000), (
        "the model's rules, as Helm renders them"
    )
    board = one(objects, "ConfigMap", f"{FULLNAME}-dashboard")
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["streamapp-dashboard.json"]) == dashboard.dashboard()


def test_flow_schema_matches_the_operator_s_service_account(helm: list[str], tmp_path: Path) -> None:
    flow = one(template(helm, None, tmp_path), "FlowSchema", GLOBAL_NAME)
    spec = flow["spec"]
    assert spec["priorityLevelConfiguration"] == {"name": "workload-high"}
    assert spec["matchingPrecedence"] == 1000
    [rule] = spec["rules"]
    assert rule["subjects"] == [
        {"kind": "ServiceAccount", "serviceAccount": {"name": FULLNAME, "namespace": NAMESPACE}}
    ]
    assert rule["resourceRules"][0]["verbs"] == ["*"] and rule["resourceRules"][0]["clusterScope"] is True
    values = {"flowControl": {"priorityLevel": "streamapp", "matchingPrecedence": 500}}
    custom = one(template(helm, values, tmp_path), "FlowSchema")["spec"]
    assert (custom["priorityLevelConfiguration"]["name"], custom["matchingPrecedence"]) == ("streamapp", 500)
    disabled = template(helm, {"flowControl": {"enabled": False}}, tmp_path)
    assert "FlowSchema" not in kinds(disabled)


def test_crd_upgrade_job(helm: list[str], tmp_path: Path) -> None:
    values = {
        "crds": {"upgradeJob": {"enabled": True}},
        "nodeSelector": {"pool": "system"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    }
    objects = template(helm, values, tmp_path)
    job = one(objects, "Job", f"{FULLNAME}-crds")
    hooks = [o for o in objects if "helm.sh/hook" in o["metadata"].get("annotations", {})]
    assert sorted(o["kind"] for o in hooks) == ["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"]
    for hook in hooks:
        annotations = hook["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    weights = {o["kind"]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in hooks}
    assert weights["ServiceAccount"] < weights["ClusterRoleBinding"] < weights["Job"]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == f"{FULLNAME}-crds"
    assert pod["containers"][0]["command"] == ["streamapp", "crd", "--apply"]
    assert pod["nodeSelector"] == {"pool": "system"}
    assert pod["tolerations"] == values["tolerations"]
    role = one(objects, "ClusterRole", f"{GLOBAL_NAME}-crds")
    assert role["rules"] == crd_upgrade_rules()
    assert role["rules"][0]["resourceNames"] == [
        "streamapps.streamapp.dev",
        "streamappmembers.streamapp.dev",
    ]


def test_image_and_pod_overrides(helm: list[str], tmp_path: Path) -> None:
    values = {
        "image": {"repository": "registry.example/streamapp", "tag": "1.2.3", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "pull"}],
        "extraEnv": [{"name": "STREAMAPP_X", "value": "1"}],
        "podLabels": {"extra": "yes"},
        "serviceAccount": {"name": "custom"},
        "resources": {"limits": {"memory": "1Gi"}},
    }
    objects = template(helm, values, tmp_path)
    pod = one(objects, "Deployment")["spec"]["template"]
    operator = pod["spec"]["containers"][0]
    assert operator["image"] == "registry.example/streamapp:1.2.3"
    assert operator["imagePullPolicy"] == "Always"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "pull"}]
    assert {"name": "STREAMAPP_X", "value": "1"} in operator["env"]
    # Helm merges maps: the default requests stay.
    assert operator["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert pod["metadata"]["labels"]["extra"] == "yes"
    assert pod["spec"]["serviceAccountName"] == "custom"
    assert one(objects, "ServiceAccount")["metadata"]["name"] == "custom"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("replicaCount=abc", "replicaCount"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("replicas=2", "replicas"),  # an unknown key: a typo must not pass silently
        ("flowControl.matchingPrecedence=9000", "matchingPrecedence"),  # after service-accounts: useless
    ],
)
def test_schema_rejects_bad_values(helm: list[str], setting: str, message: str) -> None:
    result = run_helm(helm, "template", RELEASE, str(CHART), "--set", setting)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert message in result.stderr


def test_hardening_defaults_probes_budget_and_the_users_roles(helm: list[str], tmp_path: Path) -> None:
    objects = template(helm, None, tmp_path)
    deployment = one(objects, "Deployment", FULLNAME)
    assert deployment["spec"]["revisionHistoryLimit"] == 3
    operator = container(objects)
    for probe in ("livenessProbe", "readinessProbe"):
        assert operator[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}
    assert operator["resources"]["limits"]["memory"] == "768Mi", "above the 544 MB measured at 100k tasks"
    budget = one(objects, "PodDisruptionBudget", FULLNAME)
    assert budget["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": deployment["spec"]["selector"]["matchLabels"]},
    }
    aggregated = {
        o["metadata"]["name"].rsplit("-", 1)[1]: o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] != GLOBAL_NAME
    }
    assert sorted(aggregated) == ["admin", "edit", "view"]
    for role, body in aggregated.items():
        assert body["metadata"]["labels"][f"rbac.authorization.k8s.io/aggregate-to-{role}"] == "true"
    view_verbs = {verb for rule in aggregated["view"]["rules"] for verb in rule["verbs"]}
    assert view_verbs == {"get", "list", "watch"}
    assert covers(
        aggregated["edit"]["rules"],
        {"apiGroups": ["streamapp.dev"], "resources": ["streamapps/scale"], "verbs": ["patch"]},
    )
    assert not covers(
        aggregated["edit"]["rules"],
        {"apiGroups": ["streamapp.dev"], "resources": ["streamappmembers"], "verbs": ["patch"]},
    ), "members are the operator's to write"


def test_hardening_values(helm: list[str], tmp_path: Path) -> None:
    spread = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "ScheduleAnyway",
    }
    values = {
        "priorityClassName": "streamapp-critical",
        "topologySpreadConstraints": [spread],
        "extraArgs": ["--min-reconcile-interval=5", "--verbose"],
        "revisionHistoryLimit": 1,
        "probes": {"enabled": False},
        "networkPolicy": {"enabled": True},
        "rbac": {"aggregateToDefaultRoles": False},
        "crds": {"upgradeJob": {"enabled": True}},
    }
    objects = template(helm, values, tmp_path)
    deployment = one(objects, "Deployment", FULLNAME)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "streamapp-critical"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert pod["topologySpreadConstraints"] == [{**spread, "labelSelector": {"matchLabels": selector}}]
    assert container(objects)["args"][-2:] == ["--min-reconcile-interval=5", "--verbose"]
    assert "livenessProbe" not in container(objects)
    assert deployment["spec"]["revisionHistoryLimit"] == 1
    policy = one(objects, "NetworkPolicy", FULLNAME)
    assert policy["spec"]["podSelector"] == {"matchLabels": selector}
    assert policy["spec"]["ingress"] == [{"ports": [{"port": 8080, "protocol": "TCP"}]}]
    assert not [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-view")]
    job = one(objects, "Job")
    assert job["spec"]["ttlSecondsAfterFinished"] == 86_400
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"memory": "256Mi"}
    single = template(helm, {"replicaCount": 1}, tmp_path)
    assert "PodDisruptionBudget" not in kinds(single), "a budget of one replica would block every drain"


def test_rbac_create_false_leaves_the_operators_rbac_to_the_cluster(helm: list[str], tmp_path: Path) -> None:
    values = {
        "rbac": {"create": False, "aggregateToDefaultRoles": False},
        "crds": {"upgradeJob": {"enabled": False}},
    }
    kinds = {o["kind"] for o in template(helm, values, tmp_path)}
    assert not kinds & {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}, kinds
    assert {"Deployment", "ServiceAccount"} <= kinds
    with_rbac = {o["kind"] for o in template(helm, None, tmp_path)}
    assert {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} <= with_rbac


@pytest.mark.parametrize(
    ("values", "flag", "policies"),
    [
        # `references` (what an author may name) is installed whatever Spark's setting.
        ({}, False, {"spark-executors", "references"}),
        ({"sparkExecutors": {"allowed": True}}, True, {"member-pods", "references"}),
        (
            {"sparkExecutors": {"allowed": True}, "podTemplates": {"allowPrivileged": True}},
            True,
            {"references"},
        ),
    ],
)
def test_spark_executors_are_refused_unless_allowed_and_then_fenced(
    helm: list[str], tmp_path: Path, values: dict[str, Any], flag: bool, policies: set[str]
) -> None:
    """Off by default: no operator flag and the gate policy; allowed: the flag and the member-pods
    policy instead (on an API server that serves admission policies)."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    served = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
    result = run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "-f",
        str(path),
        "--api-versions",
        served,
    )
    assert result.returncode == 0, result.stderr
    objects = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    assert ("--allow-spark-executors" in container(objects)["args"]) is flag
    prefix = f"{NAMESPACE}-{FULLNAME}-"
    spark = {
        o["metadata"]["name"].removeprefix(prefix)
        for o in objects
        if o["kind"] == "ValidatingAdmissionPolicy" and not o["metadata"]["name"].endswith("-pod-templates")
    }
    assert spark == policies
    for name in policies:
        binding = one(objects, "ValidatingAdmissionPolicyBinding", prefix + name)
        assert binding["spec"]["policyName"] == prefix + name
    if "member-pods" in policies:
        member_pods = one(objects, "ValidatingAdmissionPolicyBinding", prefix + "member-pods")
        assert member_pods["spec"]["paramRef"] == {"selector": {}, "parameterNotFoundAction": "Allow"}
