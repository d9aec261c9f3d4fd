"""The operator's patches and deletes apply to the object it observed, not to whatever holds the name.

Between the watch event the operator acts on and its write, anyone who may create objects in the
namespace can delete a child and create their own under the same name. Each write carries the observed
UID (a delete's `preconditions.uid`, a patch's `metadata.uid`): on the real API server the other
party's object is neither patched nor deleted, and the operator takes the refusal as "not ours"
rather than an error to retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from streamapp.api.names import GROUP, HANDOFF_ANNOTATION, MEMBERS, RESTART_ANNOTATION, VERSION
from streamapp.controller.kube import Kube

NEW = {"metadata": {"labels": {"owner": "someone-else"}}}


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, **NEW["metadata"]},
        "spec": {"containers": [{"name": "c", "image": "theirs"}], "nodeName": "nowhere"},
    }


def _replaced(
    create: Callable[[], Any], delete: Callable[[], Any], read: Callable[[], Any]
) -> tuple[str, Callable[[], Any]]:
    """Create an object (the app's, as the operator observed it), then let someone else delete it and
    create their own under its name: the observed UID, and a reader of what holds the name now."""
    observed = str(client.ApiClient().sanitize_for_serialization(create())["metadata"]["uid"])
    delete()
    create()
    return observed, lambda: client.ApiClient().sanitize_for_serialization(read())


@pytest.mark.usefixtures("crds")
def test_an_object_recreated_under_the_same_name_is_neither_patched_nor_deleted(
    api_client: client.ApiClient, namespace: str
) -> None:
    kube = Kube(api_client)
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    policy, custom = client.PolicyV1Api(api_client), client.CustomObjectsApi(api_client)
    now = 0  # the grace period of the deletes that stand for the other party's

    name = "counts-0"
    uid, pod = _replaced(
        lambda: core.create_namespaced_pod(namespace, _pod(name)),
        lambda: core.delete_namespaced_pod(name, namespace, grace_period_seconds=now),
        lambda: core.read_namespaced_pod(name, namespace),
    )
    kube.annotate_pod(namespace, name, {HANDOFF_ANNOTATION: "x"}, uid=uid)
    kube.delete_pod(namespace, name, uid=uid)
    theirs = pod()
    assert theirs["metadata"]["uid"] != uid and not theirs["metadata"].get("deletionTimestamp")
    assert not {HANDOFF_ANNOTATION, RESTART_ANNOTATION} & set(theirs["metadata"].get("annotations") or {})

    member = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StreamAppMember",
        "metadata": {"name": name, **NEW["metadata"]},
        "spec": {"app": "counts", "memberId": 0, "generation": 1},
    }
    uid, read_member = _replaced(
        lambda: custom.create_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, member),
        lambda: custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, name),
        lambda: custom.get_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, name),
    )
    kube.patch_member_spec(namespace, name, {"generation": 9}, uid=uid)
    kube.delete_member(namespace, name, uid=uid)
    assert read_member()["spec"]["generation"] == 1

    uid, account = _replaced(
        lambda: core.create_namespaced_service_account(namespace, {"metadata": {"name": name}}),
        lambda: core.delete_namespaced_service_account(name, namespace),
        lambda: core.read_namespaced_service_account(name, namespace),
    )
    kube.patch_account_annotations(namespace, name, {"iam": "ours"}, uid=uid)
    kube.delete(namespace, "ServiceAccount", name, uid=uid)
    assert "iam" not in (account()["metadata"].get("annotations") or {})

    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]
    uid, role = _replaced(
        lambda: rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules}),
        lambda: rbac.delete_namespaced_role(name, namespace),
        lambda: rbac.read_namespaced_role(name, namespace),
    )
    kube.patch_role_rules(namespace, name, [], uid=uid)
    kube.delete(namespace, "Role", name, uid=uid)
    assert role()["rules"] == rules

    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    uid, read_binding = _replaced(
        lambda: rbac.create_namespaced_role_binding(namespace, binding),
        lambda: rbac.delete_namespaced_role_binding(name, namespace),
        lambda: rbac.read_namespaced_role_binding(name, namespace),
    )
    kube.delete(namespace, "RoleBinding", name, uid=uid)
    assert read_binding()["metadata"]["uid"] != uid

    budget = {
        "metadata": {"name": name},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"a": "b"}}},
    }
    uid, read_budget = _replaced(
        lambda: policy.create_namespaced_pod_disruption_budget(namespace, budget),
        lambda: policy.delete_namespaced_pod_disruption_budget(name, namespace),
        lambda: policy.read_namespaced_pod_disruption_budget(name, namespace),
    )
    kube.patch_budget(namespace, name, 5, uid=uid)
    assert read_budget()["spec"]["maxUnavailable"] == 1

    # The same writes with the UID of what holds the name do apply: the condition is what refused them.
    current = str(read_budget()["metadata"]["uid"])
    kube.patch_budget(namespace, name, 5, uid=current)
    assert read_budget()["spec"]["maxUnavailable"] == 5
    current = str(read_member()["metadata"]["uid"])
    kube.patch_member_spec(namespace, name, {"generation": 9}, uid=current)
    assert read_member()["spec"]["generation"] == 9
