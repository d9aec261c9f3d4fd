"""The references ValidatingAdmissionPolicy (api/referencepolicy.py) on the real API server, as a tenant
who may create StreamApps and nothing else: every Secret, ConfigMap, claim, image pull secret and
resource claim an app names is refused, the message naming the field, the kind and the object, until the
tenant is granted `get` on that very object; then the same app is accepted."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import rawjson
import tenancy
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from localcluster.waiting import wait_for
from streamapp.api.names import APPS, GROUP, VERSION
from streamapp.render import admissionpolicy, referencepolicy

T = "spec.executor.podTemplate.spec"
C = f"{T}.<containers|initContainers|ephemeralContainers>[]"
TIMEOUT_S = 60.0
Mutation = Callable[[dict[str, Any]], None]


def base(name: str) -> dict[str, Any]:
    return tenancy.minimal_app(name, {"image": "img"})


def template(**spec: Any) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        body["spec"]["executor"]["podTemplate"] = {"spec": spec}

    return mutate


def pipeline(**fields: Any) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        body["spec"]["pipeline"].update(fields)

    return mutate


KAFKA = {"bootstrapServers": "kafka:9092", "topic": "t"}
# (id, mutation, field named, kind named, (api group, resource, name) the tenant is then granted)
CASES: list[tuple[str, Mutation, str, str, tuple[str, str, str]]] = [
    (
        "state-store-credentials",
        pipeline(stateStore={"uri": "s3://bucket/app", "credentialsSecret": "s3-keys"}),
        "spec.pipeline.stateStore.credentialsSecret",
        "Secret",
        ("", "secrets", "s3-keys"),
    ),
    (
        "kafka-source-credentials",
        pipeline(source={"type": "kafka", "kafka": {**KAFKA, "credentials": {"secretName": "kafka-in"}}}),
        "spec.pipeline.source.kafka.credentials.secretName",
        "Secret",
        ("", "secrets", "kafka-in"),
    ),
    (
        "kafka-sink-credentials",
        pipeline(sink={"type": "kafka", "kafka": {**KAFKA, "credentials": {"secretName": "kafka-out"}}}),
        "spec.pipeline.sink.kafka.credentials.secretName",
        "Secret",
        ("", "secrets", "kafka-out"),
    ),
    (
        "secret-volume",
        template(volumes=[{"name": "v", "secret": {"secretName": "mounted"}}]),
        f"{T}.volumes[].secret.secretName",
        "Secret",
        ("", "secrets", "mounted"),
    ),
    (
        "projected-secret",
        template(volumes=[{"name": "v", "projected": {"sources": [{"secret": {"name": "projected"}}]}}]),
        f"{T}.volumes[].projected.sources[].secret.name",
        "Secret",
        ("", "secrets", "projected"),
    ),
    (
        "csi-secret",
        template(
            volumes=[{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-creds"}}}]
        ),
        f"{T}.volumes[].csi.nodePublishSecretRef.name",
        "Secret",
        ("", "secrets", "csi-creds"),
    ),
    (
        "env-secret",
        template(
            initContainers=[
                {
                    "name": "init",
                    "image": "i",
                    "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}}],
                }
            ]
        ),
        f"{C}.env[].valueFrom.secretKeyRef.name",
        "Secret",
        ("", "secrets", "env-secret"),
    ),
    (
        "env-from-secret",
        template(containers=[{"name": "executor", "envFrom": [{"secretRef": {"name": "all-of-it"}}]}]),
        f"{C}.envFrom[].secretRef.name",
        "Secret",
        ("", "secrets", "all-of-it"),
    ),
    (
        "image-pull-secret",
        template(imagePullSecrets=[{"name": "registry"}]),
        f"{T}.imagePullSecrets[].name",
        "Secret",
        ("", "secrets", "registry"),
    ),
    (
        "config-map-volume",
        template(volumes=[{"name": "v", "configMap": {"name": "settings"}}]),
        f"{T}.volumes[].configMap.name",
        "ConfigMap",
        ("", "configmaps", "settings"),
    ),
    (
        "projected-config-map",
        template(
            volumes=[{"name": "v", "projected": {"sources": [{"configMap": {"name": "projected-cm"}}]}}]
        ),
        f"{T}.volumes[].projected.sources[].configMap.name",
        "ConfigMap",
        ("", "configmaps", "projected-cm"),
    ),
    (
        "env-config-map",
        template(
            containers=[
                {
                    "name": "side",
                    "image": "i",
                    "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}}],
                }
            ]
        ),
        f"{C}.env[].valueFrom.configMapKeyRef.name",
        "ConfigMap",
        ("", "configmaps", "env-cm"),
    ),
    (
        "env-from-config-map",
        template(containers=[{"name": "executor", "envFrom": [{"configMapRef": {"name": "all-cm"}}]}]),
        f"{C}.envFrom[].configMapRef.name",
        "ConfigMap",
        ("", "configmaps", "all-cm"),
    ),
    (
        "claim",
        template(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "team-data"}}]),
        f"{T}.volumes[].persistentVolumeClaim.claimName",
        "PersistentVolumeClaim",
        ("", "persistentvolumeclaims", "team-data"),
    ),
    (
        "resource-claim",
        template(resourceClaims=[{"name": "gpu", "resourceClaimName": "team-gpu"}]),
        f"{T}.resourceClaims[].resourceClaimName",
        "ResourceClaim",
        ("resource.k8s.io", "resourceclaims", "team-gpu"),
    ),
]


@pytest.fixture
def policy(api_client: client.ApiClient, namespace: str, crds: None) -> Iterator[None]:
    """The generated policy, bound as installs bind it but to this test's namespace only."""
    with tenancy.bound_to(
        api_client, namespace, referencepolicy.policy(), admissionpolicy.binding(referencepolicy.NAME)
    ):
        yield


@pytest.fixture
def tenant(api_client: client.ApiClient, namespace: str) -> Iterator[client.ApiClient]:
    """A client acting as a user who may create, read and change StreamApps in the namespace and
    nothing else (impersonated by the admin client)."""
    with tenancy.tenant(api_client, namespace, ["create", "get", "update", "patch"]) as impersonating:
        yield impersonating


def _refusal(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> str | None:
    """The API server's message refusing the app (a dry run), or None when it accepts it."""
    try:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, APPS, body, dry_run="All"
        )
    except ApiException as error:
        if error.status in (403, 422):
            return str(json.loads(error.body)["message"])
        raise
    return None


def test_a_tenant_may_reference_only_what_it_may_get(
    api_client: client.ApiClient, namespace: str, policy: None, tenant: client.ApiClient
) -> None:
    first = base("probe")
    CASES[0][1](first)
    # The policy takes effect a moment after it is created, the tenant's Role too.
    wait_for(lambda: _refusal(tenant, namespace, first), TIMEOUT_S, "the policy's first refusal")
    plain = base("plain")
    assert _refusal(tenant, namespace, plain) is None, "an app naming nothing is the tenant's to create"

    failures = []
    for case, mutate, field, kind, (_group, _resource, name) in CASES:
        body = base(case)
        mutate(body)
        message = _refusal(tenant, namespace, body)
        said = f"{field} names {kind} {name} in namespace {namespace}"
        if message is None or said not in message:
            failures.append(f"{case}: expected {said!r} in {message!r}")
        assert _refusal(api_client, namespace, body) is None, f"{case}: the admin may get it, so may use it"
    assert failures == [], "\n".join(failures)

    for index, (case, mutate, _field, _kind, (group, resource, name)) in enumerate(CASES):
        body = base(case)
        mutate(body)
        rule = {"apiGroups": [group], "resources": [resource], "resourceNames": [name], "verbs": ["get"]}
        tenancy.grant(api_client, namespace, f"get-{index}", tenancy.tenant_user(namespace), [rule])
        wait_for(
            lambda body=body: _refusal(tenant, namespace, body) is None or None,
            TIMEOUT_S,
            f"{case} accepted once granted",
        )


def test_the_policy_reads_a_null_as_absent(
    api_client: client.ApiClient, namespace: str, policy: None, tenant: client.ApiClient
) -> None:
    """Nulls kept by the API server in the template neither error (which would refuse with a CEL
    error) nor hide a reference beside them."""
    first = base("probe")
    CASES[3][1](first)
    wait_for(lambda: _refusal(tenant, namespace, first), TIMEOUT_S, "the policy's first refusal")
    nulls = base("nulls")
    template(
        volumes=[
            {"name": "v", "secret": None, "projected": None},
            {"name": "w", "configMap": {"name": None}},
        ],
        containers=[{"name": "executor", "env": None, "envFrom": [{"secretRef": None}]}],
        imagePullSecrets=None,
    )(nulls)
    assert rawjson.create_app(tenant, namespace, nulls, dry_run=True) is None
    hidden = base("hidden")
    template(
        volumes=[{"name": "v", "secret": None}, {"name": "w", "secret": {"secretName": "mounted"}}],
        initContainers=None,
    )(hidden)
    message = rawjson.create_app(tenant, namespace, hidden, dry_run=True)
    assert message is not None and f"{T}.volumes[].secret.secretName names Secret mounted" in message


def test_a_spec_change_is_checked_and_a_metadata_change_is_not(
    api_client: client.ApiClient, namespace: str, policy: None, tenant: client.ApiClient
) -> None:
    """An app someone else made, naming a Secret the tenant may not get: the tenant may label it, but
    not change its spec (whoever changes what the pods run decides who reads what they are given)."""
    first = base("probe")
    CASES[0][1](first)
    wait_for(lambda: _refusal(tenant, namespace, first), TIMEOUT_S, "the policy's first refusal")
    body = base("theirs")
    CASES[3][1](body)
    admin = client.CustomObjectsApi(api_client)
    admin.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)
    tenants = client.CustomObjectsApi(tenant)
    tenants.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, APPS, "theirs", {"metadata": {"labels": {"team": "a"}}}
    )
    with pytest.raises(ApiException) as refused:
        tenants.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, APPS, "theirs", {"spec": {"executor": {"image": "mine"}}}
        )
    assert refused.value.status == 403
    assert f"{T}.volumes[].secret.secretName names Secret mounted" in refused.value.body
