"""Issue 42's attacks, tried from outside: a tenant who may use StreamApps and nothing else (no pods, no
Secrets, no ConfigMaps, no claims), in a namespace without Pod Security labels, against the real API
server with the CRDs and the admission policies the kustomization ships (read from manifests/, bound
to this namespace only). Every attack that admission can see is refused at apply time, the message
naming what was refused, whether it comes with a new app or as a change of an app the tenant has; a
plain restricted app is the tenant's to create, so the refusals are the checks' and not RBAC's. Dry
runs only, beside that one app: no operator, no pod.

The attacks that pass admission by design are proven against the operator elsewhere:
- explicit nulls in a template keep the operator's restricted defaults in the member pod:
  tests/integration/test_template_inputs.py::test_nulls_posted_raw_keep_the_operators_defaults;
- a claim the author may get but another app or member owns is flagged (Degraded/ClaimRefused) and
  gets no pod: tests/integration/test_template_inputs.py::test_a_template_mounts_no_claim_of_another_app_or_member;
- a member's ServiceAccount creates only restricted pods of its own, privileged and hostPath pods
  refused (server-side dry runs, unlabelled namespace):
  tests/integration/test_member_pod_policy.py::test_a_member_s_service_account_creates_only_restricted_pods_of_its_own;
- a state store root another app owns is refused by the executor, the app Degraded naming the owner:
  tests/integration/test_store_owner_on_cluster.py::test_an_app_on_a_root_another_app_owns_is_degraded_naming_the_owner;
- Kafka transactional ids name the namespace:
  tests/kafka/test_transactional_ids.py::test_same_named_apps_of_two_namespaces_publish_to_one_topic_side_by_side;
- a member cannot acknowledge a generation it was not given:
  tests/integration/test_crds.py::test_a_member_cannot_acknowledge_a_generation_it_was_not_given;
- the operator's patches and deletes carry the UID it observed:
  tests/integration/test_ownership_preconditions.py::test_an_object_recreated_under_the_same_name_is_neither_patched_nor_deleted.

Not refused, and not tried here: a template label that another Service of the namespace selects on
(say `app: payments`) puts the member pods behind that Service; only the operator's own keys are
reserved.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import rawjson
import tenancy
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from test_reference_policy import KAFKA, Mutation, base, pipeline, template

from kubesetup import create_namespace
from localcluster.waiting import wait_for
from streamapp.api.names import APP_LABEL, APPS, GROUP, RESTART_ANNOTATION, VERSION

TIMEOUT_S = 60.0
T = "spec.executor.podTemplate.spec"
C = f"{T}.<containers|initContainers|ephemeralContainers>[]"
PRIVILEGED = "--allow-privileged-pod-templates"
MINE = "mine"  # the app the tenant has, changed by the attacks that can come as a change


def executor(**fields: Any) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        body["spec"]["executor"].update(fields)

    return mutate


def spark_conf(key: str, value: str) -> Mutation:
    return executor(sparkConf={key: value})


def named(name: str) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        body["metadata"]["name"] = name

    return mutate


def metadata(field: str, key: str) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        body["spec"]["executor"]["podTemplate"] = {"metadata": {field: {"team": "a", key: "true"}}}

    return mutate


def secret_names(kind: str, field: str, name: str) -> tuple[str, ...]:
    return (f"{field} names {kind} {name} in namespace", "you may not get it")


# A name cannot change: this attack comes only with a new app.
RENAMED = named("x-0-exec")
# (attack, mutation of a plain app, what the refusal must say)
ATTACKS: list[tuple[str, Mutation, tuple[str, ...]]] = [
    (
        "secret-volume",
        template(volumes=[{"name": "v", "secret": {"secretName": "db"}}]),
        secret_names("Secret", f"{T}.volumes[].secret.secretName", "db"),
    ),
    (
        "env-secret-key-ref",
        template(
            containers=[
                {
                    "name": "executor",
                    "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
                }
            ]
        ),
        secret_names("Secret", f"{C}.env[].valueFrom.secretKeyRef.name", "db"),
    ),
    (
        "env-from-secret",
        template(containers=[{"name": "executor", "envFrom": [{"secretRef": {"name": "db"}}]}]),
        secret_names("Secret", f"{C}.envFrom[].secretRef.name", "db"),
    ),
    (
        "config-map-volume",
        template(volumes=[{"name": "v", "configMap": {"name": "team-b-settings"}}]),
        secret_names("ConfigMap", f"{T}.volumes[].configMap.name", "team-b-settings"),
    ),
    (
        "state-store-credentials",
        pipeline(stateStore={"uri": "s3://bucket/app", "credentialsSecret": "s3-keys"}),
        secret_names("Secret", "spec.pipeline.stateStore.credentialsSecret", "s3-keys"),
    ),
    (
        "kafka-credentials",
        pipeline(source={"type": "kafka", "kafka": {**KAFKA, "credentials": {"secretName": "kafka-admin"}}}),
        secret_names("Secret", "spec.pipeline.source.kafka.credentials.secretName", "kafka-admin"),
    ),
    (
        "image-pull-secret",
        template(imagePullSecrets=[{"name": "registry"}]),
        secret_names("Secret", f"{T}.imagePullSecrets[].name", "registry"),
    ),
    (
        "claim-of-another-app",
        template(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "payments-state-0"}}]),
        secret_names(
            "PersistentVolumeClaim", f"{T}.volumes[].persistentVolumeClaim.claimName", "payments-state-0"
        ),
    ),
    (
        "spark-executors",
        executor(sparkExecutors={"instances": 1}),
        ("spec.executor.sparkExecutors", "--allow-spark-executors"),
    ),
    (
        "spark-conf-host-path",
        spark_conf("spark.kubernetes.executor.volumes.hostPath.x.mount.path", "/host"),
        ("sparkConf key spark.kubernetes.executor.volumes.hostPath.x.mount.path",),
    ),
    (
        "spark-conf-service-account",
        spark_conf("spark.kubernetes.authenticate.executor.serviceAccountName", "operator"),
        ("sparkConf key spark.kubernetes.authenticate.executor.serviceAccountName",),
    ),
    (
        "spark-conf-image",
        spark_conf("spark.kubernetes.container.image", "attacker.example.com/tools:1"),
        ("sparkConf key spark.kubernetes.container.image",),
    ),
    (
        "privileged-sidecar",
        template(containers=[{"name": "side", "image": "i", "securityContext": {"privileged": True}}]),
        ("spec.executor.podTemplate asks for privileged containers", PRIVILEGED),
    ),
    (
        "host-path-volume",
        template(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        ("spec.executor.podTemplate asks for volumes other than configMap", PRIVILEGED),
    ),
    (
        "template-service-account",
        template(serviceAccountName="default"),
        (f"{T}.serviceAccountName", "cannot choose another identity"),
    ),
    (
        "template-api-token",
        template(automountServiceAccountToken=True),
        (f"{T}.automountServiceAccountToken", "cannot choose another identity"),
    ),
    (
        "reserved-label",
        metadata("labels", APP_LABEL),
        (f"spec.executor.podTemplate.metadata.labels: the key {APP_LABEL} is reserved",),
    ),
    (
        "restart-annotation",
        metadata("annotations", RESTART_ANNOTATION),
        (f"spec.executor.podTemplate.metadata.annotations: the key {RESTART_ANNOTATION} is reserved",),
    ),
    (
        "ephemeral-volume-state-1",
        template(
            volumes=[
                {
                    "name": "state-1",
                    "ephemeral": {
                        "volumeClaimTemplate": {
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                            }
                        }
                    },
                }
            ]
        ),
        (f"{T}.volumes[0]", "an ephemeral volume's claim is named <pod>-<volume>"),
    ),
    (
        "spark-executor-pod-name",
        RENAMED,
        ("metadata.name must not end in -<number>-exec",),
    ),
]
# For each shipped policy file, an attack only that policy refuses: refused means it took effect.
PROBES = {
    "admissionpolicy.yaml": "host-path-volume",
    "referencepolicy.yaml": "secret-volume",
    "sparkexecutors-gate.yaml": "spark-executors",
}


def attack(name: str) -> dict[str, Any]:
    """A plain app attacked by the attack `name`."""
    body = base("app")
    mutate = next(m for attack, m, _ in ATTACKS if attack == name)
    mutate(body)
    return body


def restricted(name: str) -> dict[str, Any]:
    """An app whose template adds what the restricted profile allows: a sidecar, an emptyDir, a label."""
    body = base(name)
    template(
        volumes=[{"name": "cache", "emptyDir": {}}],
        containers=[
            {"name": "side", "image": "busybox", "volumeMounts": [{"name": "cache", "mountPath": "/s"}]}
        ],
    )(body)
    body["spec"]["executor"]["podTemplate"]["metadata"] = {"labels": {"team": "a"}}
    return body


@pytest.fixture(scope="module")
def tenant(api_client: client.ApiClient, crds: None) -> Iterator[tuple[client.ApiClient, str]]:
    """The tenant's client and namespace: a fresh namespace without Pod Security labels, the shipped
    policies bound to it and in effect, the tenant's Role in effect."""
    namespace = f"t-tenant-attacks-{uuid.uuid4().hex[:6]}"
    create_namespace(api_client, namespace, {"streamapp.dev/test": "true"})
    try:
        with ExitStack() as stack:
            shipped = tenancy.shipped_policies()
            assert set(shipped) == set(PROBES), "a shipped policy without a probe here, or one missing"
            for policy, binding in shipped.values():
                stack.enter_context(tenancy.bound_to(api_client, namespace, policy, binding))
            verbs = ["create", "get", "list", "watch", "update", "patch", "delete"]
            as_tenant = stack.enter_context(tenancy.tenant(api_client, namespace, verbs))
            # RBAC's refusal says "cannot create resource"; any other answer is the checks' or a yes.
            wait_for(
                lambda: (
                    "cannot create resource"
                    not in str(rawjson.create_app(as_tenant, namespace, restricted("probe"), dry_run=True))
                ),
                TIMEOUT_S,
                "the tenant's Role to take effect",
            )
            for file, probe in PROBES.items():
                wait_for(
                    lambda probe=probe: rawjson.create_app(as_tenant, namespace, attack(probe), dry_run=True),
                    TIMEOUT_S,
                    f"the policy of {file} to take effect",
                )
            apps = client.CustomObjectsApi(as_tenant)
            apps.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, restricted(MINE))
            yield as_tenant, namespace
    finally:
        client.CoreV1Api(api_client).delete_namespace(namespace)


def test_the_namespace_has_no_pod_security_labels(
    api_client: client.ApiClient, tenant: tuple[client.ApiClient, str]
) -> None:
    _, namespace = tenant
    labels = client.CoreV1Api(api_client).read_namespace(namespace).metadata.labels or {}
    assert not [key for key in labels if key.startswith("pod-security.kubernetes.io/")], labels


def test_a_restricted_app_is_the_tenants_to_create(tenant: tuple[client.ApiClient, str]) -> None:
    as_tenant, namespace = tenant
    assert rawjson.create_app(as_tenant, namespace, restricted("plain"), dry_run=True) is None


@pytest.mark.parametrize(
    ("name", "said"), [(name, said) for name, _, said in ATTACKS], ids=[a[0] for a in ATTACKS]
)
def test_the_attack_is_refused_at_apply_time_naming_what_it_asked_for(
    tenant: tuple[client.ApiClient, str], name: str, said: tuple[str, ...]
) -> None:
    as_tenant, namespace = tenant
    body = attack(name)
    message = rawjson.create_app(as_tenant, namespace, body, dry_run=True)
    assert message is not None, f"{name} was accepted"
    missing = [part for part in said if part not in message]
    assert not missing, f"{name}: {missing} not in {message!r}"


@pytest.mark.parametrize(
    ("name", "said"),
    [(name, said) for name, mutate, said in ATTACKS if mutate is not RENAMED],
    ids=[a[0] for a in ATTACKS if a[1] is not RENAMED],
)
def test_the_attack_as_a_change_of_the_tenants_app_is_refused_too(
    tenant: tuple[client.ApiClient, str], name: str, said: tuple[str, ...]
) -> None:
    as_tenant, namespace = tenant
    apps = client.CustomObjectsApi(as_tenant)
    mine = apps.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, MINE)
    mine["spec"] = attack(name)["spec"]
    try:
        apps.replace_namespaced_custom_object(GROUP, VERSION, namespace, APPS, MINE, mine, dry_run="All")
    except ApiException as error:
        assert error.status in (403, 422), error.body
        message = str(json.loads(error.body)["message"])
    else:
        raise AssertionError(f"{name} was accepted as a change of {MINE}")
    missing = [part for part in said if part not in message]
    assert not missing, f"{name}: {missing} not in {message!r}"
