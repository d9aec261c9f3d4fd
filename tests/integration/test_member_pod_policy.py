"""The pods a StreamApp member's ServiceAccount creates (Spark's executors, `spec.executor.sparkExecutors`)
are held by the shipped policy (`render.sparkpolicy.member_pod_policy`) in a namespace without Pod Security
labels: server-side dry runs of pod creates, impersonating the member's ServiceAccount with the Role the
operator gives it, refuse a privileged pod, a hostPath pod, another ServiceAccount, another image, an API
token and Secrets, and let through the executor pod the driver derives from its member pod; another
ServiceAccount of the namespace with the same rights is not caught."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tenancy
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from localcluster.waiting import wait_for
from streamapp.api import GROUP, VERSION, StreamApp
from streamapp.controller import children
from streamapp.controller.admission import violations
from streamapp.controller.permissions import executor_role_rules, spark_driver_rules
from streamapp.executor import sparkk8s
from streamapp.render import sparkpolicy

TIMEOUT_S = 60.0
APP = "counts"
MEMBER = f"{APP}-0"
IMAGE = "registry.example.com/streamapp:1"


def app_body() -> dict[str, Any]:
    return tenancy.minimal_app(APP, {"image": IMAGE, "sparkExecutors": {}})


def executor_pod(namespace: str) -> dict[str, Any]:
    """What Spark's driver asks for: the template `sparkk8s` derives from the operator's member pod,
    with what Spark adds (name, image, an emptyDir for its local directories, its environment)."""
    model = StreamApp.from_resource(
        {**app_body(), "metadata": {"name": APP, "namespace": namespace, "uid": "u"}}
    )
    pod = sparkk8s.executor_pod_template(children.pod(model, 0))
    pod["metadata"] = {"name": f"{MEMBER}-exec-1", "labels": {"spark-role": "executor"}}
    (container,) = pod["spec"]["containers"]
    container.update(image=IMAGE, args=["executor"], env=[{"name": "SPARK_EXECUTOR_ID", "value": "1"}])
    container["volumeMounts"] = [{"name": "spark-local-dir-1", "mountPath": "/tmp"}]
    pod["spec"]["volumes"] = [{"name": "spark-local-dir-1", "emptyDir": {}}]
    pod["spec"]["restartPolicy"] = "Never"
    return pod


def variant(base: dict[str, Any], change: Any) -> dict[str, Any]:
    pod = copy.deepcopy(base)
    change(pod)
    return pod


def _container(pod: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = pod["spec"]["containers"][0]
    return found


def hostile(base: dict[str, Any]) -> list[tuple[str, dict[str, Any], str]]:
    """(what, pod, the refusal names) for what the member's token must not create."""
    return [
        (
            "privileged",
            variant(
                base,
                lambda p: _container(p)["securityContext"].update(
                    privileged=True, allowPrivilegeEscalation=True
                ),
            ),
            "privileged containers",
        ),
        (
            "hostPath",
            variant(base, lambda p: p["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/"}})),
            "volumes other than",
        ),
        (
            "another account",
            variant(base, lambda p: p["spec"].update(serviceAccountName="default")),
            "another ServiceAccount than the member's own",
        ),
        (
            "another image",
            variant(base, lambda p: _container(p).update(image="attacker.example.com/tools:1")),
            "an image other than the app's spec.executor.image",
        ),
        (
            "an API token",
            variant(base, lambda p: p["spec"].update(automountServiceAccountToken=True)),
            "an API token",
        ),
        (
            "a Secret volume",
            variant(
                base, lambda p: p["spec"]["volumes"].append({"name": "s", "secret": {"secretName": "db"}})
            ),
            "volumes other than",
        ),
        (
            "a Secret in the environment",
            variant(
                base,
                lambda p: _container(p)["env"].append(
                    {"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
                ),
            ),
            "a Secret in the environment",
        ),
        (
            "root",
            variant(base, lambda p: p["spec"]["securityContext"].update(runAsNonRoot=False, runAsUser=0)),
            "running as root",
        ),
        (
            "no restricted settings",
            variant(
                base, lambda p: (p["spec"].update(securityContext={}), _container(p).pop("securityContext"))
            ),
            "runAsNonRoot: true",
        ),
    ]


@pytest.fixture
def member_pods_policy(api_client: client.ApiClient, namespace: str, crds: None) -> Iterator[None]:
    """The generated policy, bound as installs bind it but to this test's namespace only."""
    policy, binding = sparkpolicy.member_pod_policy(), sparkpolicy.member_pod_binding()
    with tenancy.bound_to(api_client, namespace, policy, binding):
        yield


def _account(api: client.ApiClient, namespace: str, name: str, rules: list[dict[str, Any]]) -> None:
    client.CoreV1Api(api).create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )


def _as(kubeconfig_path: Path, namespace: str, account: str) -> client.ApiClient:
    """An admin client impersonating a ServiceAccount of `namespace` (as its token would authenticate)."""
    api = config.new_client_from_config(config_file=str(kubeconfig_path))
    api.set_default_header("Impersonate-User", f"system:serviceaccount:{namespace}:{account}")
    api.set_default_header("Impersonate-Group", "system:serviceaccounts")
    return api


def _create(api: client.ApiClient, namespace: str, pod: dict[str, Any]) -> str | None:
    """None when the dry-run create is allowed, else the refusal's message (403 from RBAC is raised)."""
    try:
        client.CoreV1Api(api).create_namespaced_pod(namespace, pod, dry_run="All")
    except ApiException as error:
        if error.status in (400, 422):
            return str(json.loads(error.body)["message"])
        raise
    return None


def test_a_member_s_service_account_creates_only_restricted_pods_of_its_own(
    api_client: client.ApiClient, namespace: str, kubeconfig_path: Path, member_pods_policy: None
) -> None:
    labels = client.CoreV1Api(api_client).read_namespace(namespace).metadata.labels or {}
    assert not any(key.startswith("pod-security.kubernetes.io/") for key in labels)
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, StreamApp.PLURAL, app_body()
    )
    _account(api_client, namespace, MEMBER, executor_role_rules(MEMBER, spark_driver=True))
    _account(api_client, namespace, "other-controller", spark_driver_rules())
    base = executor_pod(namespace)
    cases = hostile(base)
    as_member = _as(kubeconfig_path, namespace, MEMBER)
    as_other = _as(kubeconfig_path, namespace, "other-controller")
    try:
        privileged = cases[0][1]
        # RBAC bindings and the policy's params take a moment to reach the API server's caches.
        wait_for(
            lambda: _refused_or_none(as_member, namespace, privileged),
            TIMEOUT_S,
            "the policy to refuse the member's privileged pod",
        )
        for what, pod, said in cases:
            message = _create(as_member, namespace, pod)
            assert message is not None and said in message, (what, message)
        assert _create(as_member, namespace, base) is None, "the executor pod Spark asks for"
        # The operator's own pod-template rules refuse the same privileges.
        assert list(violations({"spec": cases[0][1]["spec"]})) and list(
            violations({"spec": cases[1][1]["spec"]})
        )
        assert not list(violations({"spec": base["spec"]}))
        # Another ServiceAccount of the namespace, with the same rights, is not the policy's business.
        other = variant(privileged, lambda p: p["spec"].update(serviceAccountName="other-controller"))
        assert _create(as_other, namespace, other) is None
    finally:
        as_member.close()
        as_other.close()


def _refused_or_none(api: client.ApiClient, namespace: str, pod: dict[str, Any]) -> bool:
    try:
        return _create(api, namespace, pod) is not None
    except ApiException as error:
        if error.status == 403:  # the member's RoleBinding is not in the authorizer's cache yet
            return False
        raise
