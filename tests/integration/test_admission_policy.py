"""The pod-template ValidatingAdmissionPolicy (api/admissionpolicy.py) on the real API server: it
refuses at apply time exactly the templates the operator refuses (controller/admission.py), each with
its rule's message, and lets a restricted-compatible template through."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import rawjson
import tenancy
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from streamapp.api import StreamApp
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.api.podtemplate import POD_TEMPLATE
from streamapp.controller.admission import reserved_keys, violations
from streamapp.render import admissionpolicy

HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"spec": {"nodeName": "node-a"}}, "nodeName"),
    ({"spec": {"hostNetwork": True}}, "hostNetwork"),
    ({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}}, "seccomp"),
    ({"spec": {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}}, "unsafe sysctls"),
    ({"spec": {"securityContext": {"runAsUser": 0}}}, "user 0"),
    ({"spec": {"volumes": [{"name": "v", "nfs": {"server": "s", "path": "/"}}]}}, "volumes other than"),
    ({"spec": {"volumes": [{"name": "v", "csi": {"driver": "d"}}]}}, "volumes other than"),
    (
        {"spec": {"containers": [{"name": "side", "image": "i", "securityContext": {"privileged": True}}]}},
        "privileged containers",
    ),
    (
        {
            "spec": {
                "initContainers": [
                    {
                        "name": "init",
                        "image": "i",
                        "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                    }
                ]
            }
        },
        "added capabilities",
    ),
    (
        {
            "spec": {
                "containers": [{"name": "executor", "securityContext": {"seLinuxOptions": {"type": "spc_t"}}}]
            }
        },
        "SELinux",
    ),
    ({"spec": {"containers": [{"name": "executor", "securityContext": {"procMount": "Unmasked"}}]}}, "/proc"),
    (
        {
            "spec": {
                "containers": [
                    {"name": "executor", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}
                ]
            }
        },
        "AppArmor",
    ),
    (
        {
            "spec": {
                "containers": [
                    {"name": "side", "image": "i", "ports": [{"containerPort": 80, "hostPort": 80}]}
                ]
            }
        },
        "host ports",
    ),
    (
        {
            "metadata": {
                "annotations": {"container.apparmor.security.beta.kubernetes.io/executor": "unconfined"}
            }
        },
        "AppArmor",
    ),
]
RESTRICTED = {
    "metadata": {
        "annotations": {"container.apparmor.security.beta.kubernetes.io/executor": "runtime/default"}
    },
    "spec": {
        "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}},
        "volumes": [{"name": "c", "configMap": {"name": "x"}}, {"name": "d", "emptyDir": {}}],
        "containers": [
            {"name": "executor", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}
        ],
    },
}


def app(name: str, template: dict[str, Any]) -> dict[str, Any]:
    return tenancy.minimal_app(name, {"image": "img", "podTemplate": template})


@pytest.fixture
def policy(api_client: client.ApiClient, namespace: str, crds: None) -> Iterator[None]:
    """The generated policy, bound as installs bind it but to this test's namespace only (other tests'
    apps must not meet it)."""
    with tenancy.bound_to(api_client, namespace, admissionpolicy.policy(), admissionpolicy.binding()):
        yield


def _create(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, body, dry_run="All"
    )


def test_the_policy_refuses_at_apply_time_what_the_operator_refuses(
    api_client: client.ApiClient, namespace: str, policy: None
) -> None:
    # The policy takes effect a moment after it is created: wait for its first refusal.
    first, said = HOSTILE[0]
    deadline = time.monotonic() + 30
    while True:
        try:
            _create(api_client, namespace, app("probe", first))
        except ApiException as error:
            if error.status == 422 and said in error.body:
                break
            raise
        assert time.monotonic() < deadline, "the policy never took effect"
        time.sleep(0.5)
    for index, (template, said) in enumerate(HOSTILE):
        assert list(violations(template)), f"the operator lets {template} through"
        with pytest.raises(ApiException) as refused:
            _create(api_client, namespace, app(f"hostile-{index}", template))
        assert refused.value.status == 422 and said in refused.value.body, (template, refused.value.body)
        assert "--allow-privileged-pod-templates" in refused.value.body
    assert not list(violations(RESTRICTED))
    _create(api_client, namespace, app("restricted", copy.deepcopy(RESTRICTED)))
    StreamApp.from_resource(
        {**app("restricted", RESTRICTED), "metadata": {"name": "restricted", "namespace": namespace}}
    )


# Templates the API server stores with their nulls (fields beyond the schema are kept as written). The
# operator reads a null as absent (api.podtemplate.without_nulls), so the policy must too: neither
# refuse them (`has()` is true for a null field, whose fields are then CEL errors, and `null == ''`
# is false) nor let a null hide what stands beside it.
NULLS: list[dict[str, Any]] = [
    {"spec": {"securityContext": None}},
    {"spec": {"securityContext": {"runAsNonRoot": None, "seccompProfile": None, "seLinuxOptions": None}}},
    {"spec": {"securityContext": {"sysctls": None, "appArmorProfile": None, "windowsOptions": None}}},
    {"spec": {"containers": [{"name": "executor", "securityContext": None, "ports": None}]}},
    {
        "spec": {
            "containers": [
                {
                    "name": "side",
                    "image": "i",
                    "securityContext": {
                        "allowPrivilegeEscalation": None,
                        "privileged": None,
                        "capabilities": None,
                    },
                    "ports": [{"containerPort": 80, "hostPort": None}],
                }
            ]
        }
    },
    {
        "spec": {
            "initContainers": [
                {"name": "init", "image": "i", "securityContext": {"capabilities": {"add": None}}}
            ]
        }
    },
    {
        "spec": {
            "nodeName": None,
            "hostNetwork": None,
            "volumes": [{"name": "v", "hostPath": None, "emptyDir": {}}],
        }
    },
    {"spec": None, "metadata": {"annotations": None}},
]
HIDDEN_BY_NULLS: list[tuple[dict[str, Any], str]] = [
    (
        {"spec": {"securityContext": {"runAsNonRoot": None, "runAsUser": 0}}},
        "user 0",
    ),
    (
        {
            "spec": {
                "containers": [
                    {
                        "name": "side",
                        "image": "i",
                        "securityContext": {"allowPrivilegeEscalation": None, "privileged": True},
                    }
                ]
            }
        },
        "privileged containers",
    ),
    (
        {"spec": {"volumes": [{"name": "v", "emptyDir": None, "hostPath": {"path": "/"}}]}},
        "volumes other than",
    ),
]


def test_the_policy_reads_a_null_as_absent(
    api_client: client.ApiClient, namespace: str, policy: None
) -> None:
    first, said = HOSTILE[0]
    deadline = time.monotonic() + 30
    while rawjson.create_app(api_client, namespace, app("probe", first), dry_run=True) is None:
        assert time.monotonic() < deadline, "the policy never took effect"
        time.sleep(0.5)
    for index, template in enumerate(NULLS):
        body = app(f"nulls-{index}", template)
        assert not list(violations(as_read(template))), template
        assert rawjson.create_app(api_client, namespace, body, dry_run=True) is None, template
    for index, (template, said) in enumerate(HIDDEN_BY_NULLS):
        assert list(violations(as_read(template))), template
        message = rawjson.create_app(api_client, namespace, app(f"hidden-{index}", template), dry_run=True)
        assert message is not None and said in message, (template, message)


def as_read(template: dict[str, Any]) -> dict[str, Any]:
    """The template as the operator reads it."""
    return POD_TEMPLATE.decode(template, "spec.executor.podTemplate")


RESERVED_KEYS: list[tuple[str, str]] = [
    ("labels", "streamapp.dev/app"),
    ("labels", "app.kubernetes.io/managed-by"),
    ("labels", "x.streamapp.dev/member"),
    ("annotations", "streamapp.dev/operator-restart"),
]


def test_the_policy_refuses_the_operators_own_keys_as_the_operator_does(
    api_client: client.ApiClient, namespace: str, policy: None
) -> None:
    """Template labels and annotations go onto the member pods; the operator's keys are refused at
    apply time and by the operator alike, each message naming the key; other keys pass both."""
    probe = {"metadata": {"labels": {"streamapp.dev/app": "other"}}}
    deadline = time.monotonic() + 30
    while True:
        try:
            _create(api_client, namespace, app("probe", probe))
        except ApiException as error:
            if error.status == 422 and "streamapp.dev/app" in error.body:
                break
            raise
        assert time.monotonic() < deadline, "the policy never took effect"
        time.sleep(0.5)
    for index, (field, key) in enumerate(RESERVED_KEYS):
        template = {"metadata": {field: {"team": "a", key: "true"}}}
        [(path, _)] = reserved_keys(template)
        assert key in path
        with pytest.raises(ApiException) as refused:
            _create(api_client, namespace, app(f"reserved-{index}", template))
        message = json.loads(refused.value.body)["message"]
        assert refused.value.status == 422, message
        assert f"spec.executor.podTemplate.metadata.{field}: the key {key} is reserved" in message
    allowed = {"metadata": {"labels": {"team": "a"}, "annotations": {"prometheus.io/scrape": "true"}}}
    assert not list(reserved_keys(allowed))
    _create(api_client, namespace, app("allowed", allowed))
