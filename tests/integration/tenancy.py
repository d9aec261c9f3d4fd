"""What a tenant meets on the test cluster: admission policies bound to one test's namespace, and a
client acting as a user of that namespace who may use StreamApps and nothing else.

Admission policies and their bindings are cluster-scoped, and tests share one cluster (and one pytest
session): a policy bound as installs bind it (every namespace) would refuse what other tests create on
purpose (privileged templates the operator must flag, Secrets named by an admin). So each test binds a
policy under a name suffixed with its namespace, matching that namespace only, and deletes both
objects when it ends. The policy itself is left as given.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from api_samples import app_body
from kubernetes import client

from streamapp.api.names import APPS, GROUP

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
ADMISSION = "admissionregistration.k8s.io"
RBAC = "rbac.authorization.k8s.io"
POLICY = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"


def shipped_policies() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each admission policy the kustomization installs with its binding, by the file it comes from,
    read from those very files (manifests/kustomization.yaml's resources)."""
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    found = {}
    for resource in kustomization["resources"]:
        path = MANIFESTS / resource
        if not path.is_file():
            continue
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
        policies = [d for d in documents if d["kind"] == POLICY]
        bindings = [d for d in documents if d["kind"] == BINDING]
        if policies or bindings:
            (policy,), (binding,) = policies, bindings
            assert binding["spec"]["policyName"] == policy["metadata"]["name"], path
            found[resource] = (policy, binding)
    return found


@contextmanager
def bound_to(
    api: client.ApiClient, namespace: str, policy: dict[str, Any], binding: dict[str, Any]
) -> Iterator[None]:
    """`policy` and its `binding` created under the name `<policy name>-<namespace>`, the binding
    matching `namespace` only (the install's binding has no namespace selector of its own to keep);
    both deleted afterwards."""
    name = f"{policy['metadata']['name']}-{namespace}"[:63]
    policy = {**policy, "metadata": {"name": name}}
    spec = binding["spec"]
    assert "namespaceSelector" not in spec.get("matchResources", {}), binding
    matching = {
        **spec.get("matchResources", {}),
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
    }
    binding = {
        **binding,
        "metadata": {"name": name},
        "spec": {**spec, "policyName": name, "matchResources": matching},
    }
    custom = client.CustomObjectsApi(api)
    kinds = (("validatingadmissionpolicies", policy), ("validatingadmissionpolicybindings", binding))
    created: list[str] = []
    try:
        for plural, body in kinds:
            custom.create_cluster_custom_object(ADMISSION, "v1", plural, body)
            created.append(plural)
        yield
    finally:
        for plural in reversed(created):
            custom.delete_cluster_custom_object(ADMISSION, "v1", plural, name)


def grant(
    api: client.ApiClient,
    namespace: str,
    name: str,
    user: str,
    rules: list[dict[str, Any]],
) -> None:
    """A Role `name` with `rules`, bound to `user`."""
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": name},
            "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
        },
    )


def tenant_user(namespace: str) -> str:
    return f"tenant@{namespace}"


@contextmanager
def tenant(api: client.ApiClient, namespace: str, verbs: list[str]) -> Iterator[client.ApiClient]:
    """A client acting as `tenant@<namespace>` (impersonated by the admin client `api`), a user who may
    do `verbs` on StreamApps (and their scale) in the namespace and nothing else."""
    user = tenant_user(namespace)
    grant(
        api,
        namespace,
        "streamapps-only",
        user,
        [{"apiGroups": [GROUP], "resources": [APPS, f"{APPS}/scale"], "verbs": verbs}],
    )
    impersonating = client.ApiClient(api.configuration)
    impersonating.set_default_header("Impersonate-User", user)
    try:
        yield impersonating
    finally:
        impersonating.close()


def minimal_app(name: str, executor: dict[str, Any]) -> dict[str, Any]:
    """The smallest StreamApp the API server stores (no member runs: replicas 0), with `executor`
    as its spec.executor: what the admission tests vary."""
    return app_body(name, namespace=None, uid=None, replicas=0, partitions=1, executor=executor)
