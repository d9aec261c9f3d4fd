"""The generated CRDs, RBAC and manifests on a real kube-apiserver.

The CRDs are cluster-wide and the operator tests install the same generated files, so they are
created or replaced here and left in place; every object a test makes lives in its own namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_samples import app
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from test_kubectl import APP_COLUMNS, MEMBER_COLUMNS

from localcluster import build
from localcluster.waiting import wait_for
from streamapp.api import GROUP, VERSION, StreamApp, StreamAppMember
from streamapp.controller.permissions import executor_role_rules, operator_cluster_role_rules
from streamapp.rebalance.config import RebalanceConfig

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60.0
APPS, MEMBERS = StreamApp.PLURAL, StreamAppMember.PLURAL


@pytest.fixture
def objects(api_client: client.ApiClient, crds: None) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


def _create(
    objects: client.CustomObjectsApi, namespace: str, body: dict[str, Any], plural: str = APPS
) -> Any:
    """Create, retrying while the new resource is not served yet (discovery lags Established)."""

    def attempt() -> Any:
        try:
            return objects.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    return wait_for(attempt, TIMEOUT_S, f"{plural} to be served")


def _member(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StreamAppMember",
        "metadata": {"name": name},
        "spec": spec,
    }


def _refused(action: Callable[[], Any]) -> str:
    """The message of the 422 an invalid request gets (it lists every failed rule with its field)."""
    with pytest.raises(ApiException) as refused:
        action()
    assert refused.value.status == 422, refused.value.body
    message: str = json.loads(refused.value.body)["message"]
    return message


def test_defaults_are_applied_by_the_api_server(objects: client.CustomObjectsApi, namespace: str) -> None:
    created = _create(objects, namespace, app())
    spec = created["spec"]
    assert spec["replicas"] == 3
    assert spec["rebalance"] == RebalanceConfig().to_spec()
    assert spec["executor"]["command"] == ["streamapp", "executor", "--from-cluster"]
    assert spec["executor"]["storage"] == {"retainOnScaleIn": False}
    parsed = StreamApp.from_resource(created)
    assert parsed.spec.to_dict() == spec


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"partitions": 0}, "spec.partitions in body should be greater than or equal to 1"),
        ({"replicas": -1}, "spec.replicas in body should be greater than or equal to 0"),
        (
            {"rebalance": {"maxWarmupReplicas": 0}},
            "spec.rebalance.maxWarmupReplicas in body should be greater than or equal to 1",
        ),
        (
            {"rebalance": {"acceptableRecoveryLag": -5}},
            "spec.rebalance.acceptableRecoveryLag in body should be greater than or equal to 0",
        ),
        (
            {"rebalance": {"scheduledRebalanceMaxDelay": "5 minutes"}},
            "scheduledRebalanceMaxDelay must be a duration such as 30s, 5m or 1h30m",
        ),
        ({"rebalance": {"probingRebalanceInterval": "0s"}}, "probingRebalanceInterval must be > 0"),
        (
            {"executor": {"image": "i", "serviceAccountScope": "app", "sparkExecutors": {}}},
            "serviceAccountScope app is not allowed with sparkExecutors",
        ),
        (
            {"rebalance": {"scheduledRebalanceMaxDelay": "721h"}},
            "scheduledRebalanceMaxDelay must be at most 720h",
        ),
        ({"rollingUpdate": {"handoffTimeout": "9999h"}}, "handoffTimeout must be at most 720h"),
        (
            {
                "executor": {
                    "image": "i",
                    "podTemplate": {"spec": {"containers": [{"name": "executor", "env": [{"value": "x"}]}]}},
                }
            },
            "name",
        ),
        (
            {"replicas": 2, "rebalance": {"standbyReplicas": 2}},
            "rebalance.standbyReplicas must be less than replicas",
        ),
        (
            {
                "pipeline": {
                    "transform": "no-function",
                    "source": {"type": "file", "path": "/x"},
                    "stateStore": {"uri": "file:///s"},
                }
            },
            "transform must be module:function",
        ),
        (
            {
                "pipeline": {
                    "transform": "m:f",
                    "source": {"type": "kafka", "path": "/in"},
                    "stateStore": {"uri": "file:///s"},
                }
            },
            "a kafka endpoint needs kafka (bootstrapServers and topic)",
        ),
        (
            {"executor": {"image": "i", "sparkConf": {"spark.master": "local[2]"}, "sparkExecutors": {}}},
            "sparkConf must not set spark.master with sparkExecutors",
        ),
        ({"executor": {"image": "i", "sparkExecutors": {"memory": "lots"}}}, "sparkExecutors.memory must be"),
        (
            {
                "executor": {
                    "image": "i",
                    "sparkConf": {"spark.kubernetes.executor.volumes.hostPath.r.options.path": "/"},
                }
            },
            "sparkConf key spark.kubernetes.executor.volumes.hostPath.r.options.path is not allowed",
        ),
        (
            {"executor": {"image": "i", "sparkConf": {"spark.executor.memory": "9g"}, "sparkExecutors": {}}},
            "sparkConf must not set spark.executor.memory with sparkExecutors",
        ),
        (
            {"autoscaling": {"minReplicas": 3, "maxReplicas": 2}},
            "autoscaling.minReplicas must be at most maxReplicas",
        ),
        ({"autoscaling": {"maxReplicas": 13}}, "autoscaling.maxReplicas must be at most partitions"),
        (
            {"autoscaling": {"enabled": True, "minReplicas": 1}, "rebalance": {"standbyReplicas": 1}},
            "rebalance.standbyReplicas must be less than autoscaling.minReplicas",
        ),
        ({"autoscaling": {"settleTimeout": "0s"}}, "settleTimeout must be > 0"),
    ],
)
def test_invalid_specs_are_refused_with_the_rules_message(
    objects: client.CustomObjectsApi, namespace: str, spec: dict[str, Any], message: str
) -> None:
    _create(objects, namespace, app())
    body = app(**spec)
    body["metadata"]["name"] = "invalid"
    assert message in _refused(
        lambda: objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    )


def test_partitions_are_immutable(objects: client.CustomObjectsApi, namespace: str) -> None:
    _create(objects, namespace, app())
    patch = {"spec": {"partitions": 24}}
    message = _refused(
        lambda: objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, APPS, "counts", patch)
    )
    assert "partitions is immutable" in message
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, "counts", {"spec": {"replicas": 4}}
    )


def test_scale_subresource(objects: client.CustomObjectsApi, namespace: str) -> None:
    _create(objects, namespace, app(rebalance={"standbyReplicas": 1}))
    args = (GROUP, VERSION, namespace, APPS, "counts")
    selector = "streamapp.dev/app=counts"
    objects.patch_namespaced_custom_object_status(*args, {"status": {"replicas": 3, "selector": selector}})
    objects.patch_namespaced_custom_object_scale(*args, {"spec": {"replicas": 5}})
    assert objects.get_namespaced_custom_object(*args)["spec"]["replicas"] == 5
    scale = objects.get_namespaced_custom_object_scale(*args)
    assert scale["spec"] == {"replicas": 5}
    assert scale["status"] == {"replicas": 3, "selector": selector}
    message = _refused(lambda: objects.patch_namespaced_custom_object_scale(*args, {"spec": {"replicas": 1}}))
    assert "rebalance.standbyReplicas must be less than replicas" in message
    objects.patch_namespaced_custom_object_scale(*args, {"spec": {"replicas": 0}})


def test_status_written_by_the_model_is_kept_whole(objects: client.CustomObjectsApi, namespace: str) -> None:
    """Nothing the models write is pruned by the structural schema."""
    _create(objects, namespace, app())
    status = {
        "observedGeneration": 1,
        "generation": 2,
        "replicas": 3,
        "readyReplicas": 2,
        "selector": "streamapp.dev/app=counts",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "MembersStarting",
                "message": "2/3 ready",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
        "tasks": {"active": 8, "warming": 2, "reserved": 4, "unassigned": 0, "revoking": 1},
        "members": [{"id": 0, "pod": "counts-0", "phase": "Ready", "active": 4, "standby": 0, "warmup": 1}],
        "lastRebalance": {"time": "2026-01-01T00:00:00Z", "reason": "member 2 lost", "moved": 0},
        "intent": {"generation": 2, "anything": {"nested": [1, 2]}},
    }
    written = objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, APPS, "counts", {"status": status}
    )
    assert written["status"] == status
    assert StreamApp.from_resource(written).to_dict()["status"] == status


def test_member_spec_and_status(objects: client.CustomObjectsApi, namespace: str) -> None:
    member = _member(
        "counts-0",
        app="counts",
        memberId=0,
        generation=3,
        active=[{"task": 0, "epoch": 2}, {"task": 3, "epoch": 1}],
        revoking=[{"task": 6, "epoch": 1}],
        standby=[1],
        warmup=[2],
        lagThresholds=[100],
    )
    _create(objects, namespace, member, MEMBERS)
    status = {
        "observedGeneration": 3,
        "podUID": "0f0e",
        "reportedAt": "2026-01-01T00:00:00Z",
        "tasks": [{"task": 0, "role": "active", "epoch": 2, "appliedSeq": 4, "appliedOffset": 40, "lag": 0}],
    }
    written = objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, MEMBERS, "counts-0", {"status": status}
    )
    assert written["status"] == status
    parsed = StreamAppMember.from_resource(written)
    assert parsed.to_dict()["spec"] == written["spec"]


def test_member_task_lists_are_tracked_as_one_field(objects: client.CustomObjectsApi, namespace: str) -> None:
    """The operator and the executor each replace their lists whole, so the API server keeps one
    managedFields entry per list, not one per task: with 100 tasks the entries would otherwise be most
    of the object."""
    active = [{"task": t, "epoch": 1} for t in range(100)]
    _create(
        objects,
        namespace,
        _member("counts-1", app="counts", memberId=1, generation=1, active=active),
        MEMBERS,
    )
    tasks = [{"task": t, "role": "active", "epoch": 1, "appliedSeq": 4, "lag": 0} for t in range(100)]
    status = {"observedGeneration": 1, "podUID": "0f0e", "reportedAt": "2026-01-01T00:00:00Z", "tasks": tasks}
    written = objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, MEMBERS, "counts-1", {"status": status}
    )
    fields = json.dumps(written["metadata"]["managedFields"])
    assert '"f:tasks": {}' in fields and '"f:active": {}' in fields
    assert "k:{" not in fields, "no entry per list item"


@pytest.mark.parametrize("name", ["streamapp.yaml", "kafka/streamapp-kafka.yaml"])
def test_sample_is_accepted(objects: client.CustomObjectsApi, namespace: str, name: str) -> None:
    sample = next(
        doc
        for doc in yaml.safe_load_all((ROOT / "manifests" / "samples" / name).read_text())
        if doc["kind"] == "StreamApp"
    )
    created = _create(objects, namespace, sample)
    assert created["spec"]["rebalance"]["standbyReplicas"] == 1


def _kubectl(local_cluster: Any) -> str:
    built = build.bin_dir() / "kubectl"
    if local_cluster is not None and built.exists():
        return str(built)
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("no kubectl binary")
    return found


def test_printer_columns(
    objects: client.CustomObjectsApi, namespace: str, kubeconfig_path: Path, local_cluster: Any
) -> None:
    _create(objects, namespace, app())
    active = [{"task": 0, "epoch": 1}, {"task": 5, "epoch": 1}]
    member = _member("counts-0", app="counts", memberId=0, active=active, activeTasks="0,5")
    _create(objects, namespace, member, MEMBERS)
    kubectl = _kubectl(local_cluster)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig_path)}

    def table(resource: str) -> tuple[list[str], list[dict[str, str]]]:
        """Header and rows of `kubectl get`, cut at the header's column starts (empty cells stay empty)."""
        out = subprocess.run(
            [kubectl, "get", resource, "-n", namespace, "-o", "wide"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        header, *lines = out.splitlines()
        names = header.split()
        starts = [header.index(f" {n}") + 1 if i else 0 for i, n in enumerate(names)]
        cells = [zip(names, starts, [*starts[1:], None], strict=True) for _ in lines]
        rows = [{n: line[a:b].strip() for n, a, b in cut} for line, cut in zip(lines, cells, strict=True)]
        return names, rows

    names, apps = table("sapp")
    # "INPUT LAG" is one column; split on spaces it reads as two, both empty here.
    assert names == [word for column in APP_COLUMNS for word in column.split()]
    assert apps[0] | {"AGE": ""} == {
        "NAME": "counts",
        "REPLICAS": "3",
        "READY": "",
        "STATUS": "",
        "PARTITIONS": "12",
        "WARMING": "",
        "UNASSIGNED": "",
        "GENERATION": "",
        "INPUT": "",
        "LAG": "",
        "AGE": "",
    }
    names, members = table("sam")
    assert names == MEMBER_COLUMNS
    assert members[0] | {"AGE": ""} == {
        "NAME": "counts-0",
        "APP": "counts",
        "MEMBER": "0",
        "GENERATION": "0",
        "OBSERVED": "",
        "ACTIVE": "0,5",
        "REVOKING": "",
        "STANDBY": "",
        "WARMUP": "",
        "AGE": "",
    }


def test_kustomization_builds(local_cluster: Any) -> None:
    out = subprocess.run(
        [_kubectl(local_cluster), "kustomize", str(ROOT / "manifests")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    kinds = [doc["kind"] for doc in yaml.safe_load_all(out)]
    assert kinds.count("CustomResourceDefinition") == 2
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"} <= set(kinds)
    namespaced = [
        d for d in yaml.safe_load_all(out) if d["kind"] in ("ServiceAccount", "Deployment", "Service")
    ]
    assert {d["metadata"]["namespace"] for d in namespaced} == {"streamapp-system"}


def _impersonating(kubeconfig_path: Path, namespace: str, account: str) -> client.ApiClient:
    api = config.new_client_from_config(config_file=str(kubeconfig_path))
    api.set_default_header("Impersonate-User", f"system:serviceaccount:{namespace}:{account}")
    return api


@pytest.fixture
def operator_role(api_client: client.ApiClient) -> Iterator[str]:
    """The operator's ClusterRole under a unique name (the real one may belong to an installed operator)."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    name = f"streamapp-operator-test-{uuid.uuid4().hex[:6]}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": operator_cluster_role_rules()})
    try:
        yield name
    finally:
        rbac.delete_cluster_role(name)


def _account_bound_to(
    api_client: client.ApiClient,
    namespace: str,
    binding: str,
    role_kind: str,
    role: str,
    account: str | None = None,
) -> None:
    """Bind `role` to a ServiceAccount: `account` if given (it exists), else a new one named `binding`."""
    if account is None:
        account = binding
        client.CoreV1Api(api_client).create_namespaced_service_account(
            namespace, {"metadata": {"name": account}}
        )
    client.RbacAuthorizationV1Api(api_client).create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )


def test_operator_can_grant_the_executor_role_without_escalate(
    api_client: client.ApiClient, namespace: str, kubeconfig_path: Path, operator_role: str, crds: None
) -> None:
    _account_bound_to(api_client, namespace, "operator", "ClusterRole", operator_role)
    as_operator = _impersonating(kubeconfig_path, namespace, "operator")
    try:
        rbac = client.RbacAuthorizationV1Api(as_operator)
        wait_for(
            lambda: _try(lambda: client.CoreV1Api(as_operator).list_namespaced_pod(namespace)),
            TIMEOUT_S,
            "the operator's binding to take effect",
        )
        client.CoreV1Api(as_operator).create_namespaced_service_account(
            namespace, {"metadata": {"name": "counts-1"}}
        )
        rbac.create_namespaced_role(
            namespace, {"metadata": {"name": "counts-1"}, "rules": executor_role_rules("counts-1")}
        )
        rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": "counts-1"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "counts-1"},
                "subjects": [{"kind": "ServiceAccount", "name": "counts-1", "namespace": namespace}],
            },
        )
    finally:
        as_operator.close()


def _with_token(kubeconfig_path: Path, token: str) -> client.ApiClient:
    """A client that authenticates with `token` only (no client certificate), like an executor pod."""
    admin = config.new_client_from_config(config_file=str(kubeconfig_path))
    configuration = client.Configuration()
    configuration.host = admin.configuration.host
    configuration.ssl_ca_cert = admin.configuration.ssl_ca_cert
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    admin.close()
    return client.ApiClient(configuration)


def test_a_member_token_reaches_its_own_member_only(
    api_client: client.ApiClient, namespace: str, kubeconfig_path: Path, crds: None
) -> None:
    """An executor runs user code: with its token it can follow its own target and report its own
    progress, and is refused everything else — another member's status (a forged acknowledgement
    or lag), its own spec (its assignment), the StreamApp, the list of all members."""
    objects = client.CustomObjectsApi(api_client)
    for member in (1, 2):
        _create(objects, namespace, _member(f"counts-{member}", app="counts", memberId=member), MEMBERS)
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "counts-1"}})
    client.RbacAuthorizationV1Api(api_client).create_namespaced_role(
        namespace, {"metadata": {"name": "counts-1"}, "rules": executor_role_rules("counts-1")}
    )
    _account_bound_to(api_client, namespace, "counts-1-binding", "Role", "counts-1", account="counts-1")
    token = core.create_namespaced_service_account_token(
        "counts-1", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token
    as_member = _with_token(kubeconfig_path, token)
    try:
        mine = client.CustomObjectsApi(as_member)
        own = (GROUP, VERSION, namespace, MEMBERS, "counts-1")
        other = (GROUP, VERSION, namespace, MEMBERS, "counts-2")
        wait_for(
            lambda: _try(lambda: mine.get_namespaced_custom_object(*own)), TIMEOUT_S, "the member's binding"
        )
        mine.patch_namespaced_custom_object_status(*own, {"status": {"observedGeneration": 0, "podUID": "p"}})
        watched = mine.list_namespaced_custom_object(
            GROUP, VERSION, namespace, MEMBERS, field_selector="metadata.name=counts-1"
        )
        assert [m["metadata"]["name"] for m in watched["items"]] == ["counts-1"]
        refused: list[Callable[[], Any]] = [
            lambda: mine.patch_namespaced_custom_object(
                *own, {"spec": {"active": [{"task": 0, "epoch": 9}]}}
            ),
            lambda: mine.patch_namespaced_custom_object_status(*other, {"status": {"observedGeneration": 9}}),
            lambda: mine.get_namespaced_custom_object(*other),
            lambda: mine.list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS),
            lambda: mine.list_namespaced_custom_object(GROUP, VERSION, namespace, APPS),
            lambda: mine.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, "counts"),
        ]
        for call in refused:
            with pytest.raises(ApiException) as forbidden:
                call()
            assert forbidden.value.status == 403
    finally:
        as_member.close()


def test_a_member_cannot_acknowledge_a_generation_it_was_not_given(
    api_client: client.ApiClient, namespace: str, kubeconfig_path: Path, crds: None
) -> None:
    """A member's executor (its own ServiceAccount, with the Role the operator grants it) may write
    status.observedGeneration up to its target's spec.generation and no further: a forged
    acknowledgement (9.2e18) would release revocations it never performed and lift the generation
    floor. The operator's own spec writes (generations only rise) pass, over any status."""
    objects = client.CustomObjectsApi(api_client)
    own = (GROUP, VERSION, namespace, MEMBERS, "counts-1")
    _create(objects, namespace, _member("counts-1", app="counts", memberId=1, generation=3), MEMBERS)
    client.RbacAuthorizationV1Api(api_client).create_namespaced_role(
        namespace, {"metadata": {"name": "counts-1"}, "rules": executor_role_rules("counts-1")}
    )
    _account_bound_to(api_client, namespace, "counts-1", "Role", "counts-1")
    as_member = _impersonating(kubeconfig_path, namespace, "counts-1")
    try:
        mine = client.CustomObjectsApi(as_member)
        wait_for(lambda: _try(lambda: mine.get_namespaced_custom_object(*own)), TIMEOUT_S, "the binding")

        def acknowledge(generation: int) -> Any:
            return mine.patch_namespaced_custom_object_status(
                *own, {"status": {"observedGeneration": generation}}
            )

        for forged in (4, 9_200_000_000_000_000_000):
            message = _refused(lambda forged=forged: acknowledge(forged))
            assert "status.observedGeneration may not exceed spec.generation" in message
        acknowledge(2)
        assert acknowledge(3)["status"]["observedGeneration"] == 3
        # The operator raises the target over the member's status; then 4 may be acknowledged.
        objects.patch_namespaced_custom_object(*own, {"spec": {"generation": 4}})
        assert acknowledge(4)["status"]["observedGeneration"] == 4
        assert _refused(lambda: acknowledge(5))
    finally:
        as_member.close()


def _try(call: Callable[[], Any]) -> bool:
    """True once `call` is allowed (RBAC bindings take a moment to reach the authorizer cache)."""
    try:
        call()
    except ApiException as error:
        if error.status == 403:
            return False
        raise
    return True
