"""The objects an app owns, as plain manifests (functional core, no I/O).

Pods are the operator's own rather than a StatefulSet's: the operator decides when a dead member's
pod is replaced and whether its tasks wait for it. Every child carries an ownerReference to the
StreamApp so deleting the app garbage-collects everything, and the member's labels so indices and
selectors find it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from streamapp.api.fields import ValidationError
from streamapp.api.kafka import secret_env
from streamapp.api.member import StreamAppMemberSpec
from streamapp.api.names import (
    APP_LABEL,
    EXECUTOR_PORT,
    EXECUTOR_PORT_NAME,
    GROUP,
    IMAGE_ENV,
    MANAGED_ANNOTATIONS,
    MANAGED_BY,
    REVISION_LABEL,
    SHARED_IDENTITY_LABEL,
    SPARK_EXECUTORS_ENV,
    VERSION,
    executor_account,
    member_labels,
    member_name,
    shared_executor_account,
    state_claim_name,
)
from streamapp.api.security import (
    SCRATCH_MOUNT,
    container_security_context,
    merged_container_context,
    merged_pod_context,
)
from streamapp.api.streamapp import S3_SECRET_KEYS, StateStore, StreamApp
from streamapp.controller.permissions import executor_role_rules
from streamapp.rebalance import MemberTarget

STATE_MOUNT = "/var/lib/streamapp"
# Of a member pod's grace period, what its executor keeps back after a drain to commit its last
# batches and exit before the kubelet's SIGKILL (at most half the period).
DRAIN_MARGIN_SECONDS = 10


def owner_reference(app: StreamApp) -> dict[str, Any]:
    """Makes a child garbage-collected with its app."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": StreamApp.KIND,
        "name": app.metadata.name,
        "uid": app.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def member_spec(
    app: str,
    member: int,
    target: MemberTarget | None,
    generation: int,
    retiring: bool,
    lag_thresholds: tuple[int, ...],
) -> dict[str, Any]:
    """A StreamAppMember's spec: the member's target at the generation that last changed it, in the
    wire form of `api.member.StreamAppMemberSpec` (the model the executor parses it with); `retiring`
    tells its executor to finish handing over on SIGTERM rather than stop at once, `lag_thresholds`
    which copy lags to report without delay (`RebalanceConfig.lag_thresholds`). Lists while they
    fit, packed beyond (`StreamAppMemberSpec.wire`; raises `TargetTooLarge` past what even that holds)."""
    target = target or MemberTarget({}, {}, (), ())
    spec = StreamAppMemberSpec.of(
        app,
        member,
        generation,
        target.active,
        target.revoking,
        target.standby,
        target.warmup,
        retiring,
        lag_thresholds,
    )
    return spec.wire()


def same_target(spec: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether a member's current spec already says what `wanted` says (generation aside).

    Every field of the model counts, the kubectl range strings too, so a member written before a
    field existed gets it on the next pass; a spec that does not parse is rewritten. Equal wire forms
    say the same without parsing either (the common case, at 1,000 members in every reconcile).
    """
    if {**spec, "generation": 0} == {**wanted, "generation": 0}:
        return True
    try:
        current = StreamAppMemberSpec.from_dict(spec, served=True)
    except ValidationError:
        return False
    return current.same_target(StreamAppMemberSpec.from_dict(wanted))


def member_object(app: StreamApp, member: int, spec: dict[str, Any]) -> dict[str, Any]:
    """A new StreamAppMember."""
    name = app.metadata.name
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StreamAppMember",
        "metadata": {
            "name": member_name(name, member),
            "labels": member_labels(name, member),
            "ownerReferences": [owner_reference(app)],
        },
        "spec": spec,
    }


def pod(app: StreamApp, member: int) -> dict[str, Any]:
    """The member's pod, labelled with the revision of the spec it is made from (`pod_revision`)."""
    rendered = _pod(app, member)
    rendered["metadata"]["labels"][REVISION_LABEL] = pod_revision(app)
    return rendered


def pod_revision(app: StreamApp) -> str:
    """A hash of everything a member pod is made from (image, command, resources, Spark conf, pod
    template, pipeline, storage, the app's identity in env), as a Deployment's pod-template-hash.

    It is the rendering of member 0, whose member-specific parts (names, id) never change, minus
    what is not the pod's content (its name, ownerReference): so any spec change that would render
    another pod changes it, and nothing else does (scaling does not).
    """
    rendered = _pod(app, 0)
    meta = rendered["metadata"]
    content = {"labels": meta["labels"], "annotations": meta["annotations"], "spec": rendered["spec"]}
    encoded = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:10]


def _pod(app: StreamApp, member: int) -> dict[str, Any]:
    """The executor container, its identity in env, its state volume, run under the restricted
    profile of `api.security`: the template's securityContexts (pod, executor, sidecars, init
    containers) are merged over ours field by field, so they can add to it but never drop it."""
    name = app.metadata.name
    executor = app.spec.executor
    template = copy.deepcopy(executor.pod_template or {})
    template_meta = template.get("metadata") or {}
    pod_spec: dict[str, Any] = copy.deepcopy(template.get("spec") or {})
    pod_spec.setdefault("terminationGracePeriodSeconds", executor.termination_grace_period_seconds)
    drain = drain_seconds(int(pod_spec["terminationGracePeriodSeconds"]))
    container: dict[str, Any] = {
        "name": "executor",
        "image": executor.image,
        "command": list(executor.command),
        "env": [*_env(app, member), {"name": "STREAMAPP_DRAIN_SECONDS", "value": str(drain)}],
        "ports": [{"name": EXECUTOR_PORT_NAME, "containerPort": EXECUTOR_PORT}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": EXECUTOR_PORT}, "periodSeconds": 2},
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": "state", "mountPath": STATE_MOUNT},
            {"name": "scratch", "mountPath": SCRATCH_MOUNT},
        ],
    }
    if executor.resources:
        container["resources"] = copy.deepcopy(executor.resources)
    volume: dict[str, Any] = (
        {"persistentVolumeClaim": {"claimName": state_claim_name(name, member)}}
        if executor.storage.size
        else {"emptyDir": {}}
    )
    pod_spec.setdefault("volumes", []).extend(
        [{"name": "state", **volume}, {"name": "scratch", "emptyDir": {}}]
    )
    others = [_secured(c) for c in pod_spec.get("containers") or [] if c.get("name") != "executor"]
    overrides: dict[str, Any] = next(
        (c for c in pod_spec.get("containers") or [] if c.get("name") == "executor"), {}
    )
    executor_container = _merge_container(container, overrides)
    executor_container["securityContext"] = merged_container_context(
        overrides.get("securityContext"), executor=True
    )
    pod_spec["containers"] = [executor_container, *others]
    if pod_spec.get("initContainers"):
        pod_spec["initContainers"] = [_secured(c) for c in pod_spec["initContainers"]]
    # The executors' own identity, whatever the template says: a StreamApp must not borrow the rights
    # of another ServiceAccount through the operator.
    pod_spec["serviceAccountName"] = account_of(app, member)
    pod_spec["securityContext"] = merged_pod_context(pod_spec.get("securityContext"))
    pod_spec.setdefault("restartPolicy", "Always")
    pod_spec["hostname"] = member_name(name, member)
    pod_spec["subdomain"] = name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": member_name(name, member),
            "labels": {**(template_meta.get("labels") or {}), **member_labels(name, member)},
            "annotations": dict(template_meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(app)],
        },
        "spec": pod_spec,
    }


def _secured(container: Mapping[str, Any]) -> dict[str, Any]:
    """A sidecar or init container of the template, with our container securityContext under its own."""
    secured = copy.deepcopy(dict(container))
    secured["securityContext"] = merged_container_context(container.get("securityContext"), executor=False)
    return secured


def drain_seconds(grace: int) -> int:
    """How long an executor whose pod is deleted may go on handing its tasks over: the grace period
    minus the margin it needs to commit and exit, so the handoff never races the kubelet's SIGKILL."""
    return max(0, grace - min(DRAIN_MARGIN_SECONDS, grace // 2))


def _merge_container(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A podTemplate container named `executor` refines ours: its env and mounts are added (its
    values win per name), any other field it sets replaces ours (a probe, securityContext, ...)."""
    merged = {
        **base,
        **{k: copy.deepcopy(v) for k, v in override.items() if k not in ("env", "volumeMounts")},
    }
    for key, identity in (("env", "name"), ("volumeMounts", "mountPath")):
        extra = list(override.get(key) or [])
        taken = {item[identity] for item in extra}
        merged[key] = [item for item in base.get(key) or [] if item[identity] not in taken] + copy.deepcopy(
            extra
        )
    return merged


def state_claim(app: StreamApp, member: int) -> dict[str, Any] | None:
    """The member's state volume claim, or None when the app keeps local state in an emptyDir."""
    storage = app.spec.executor.storage
    if not storage.size:
        return None
    name = app.metadata.name
    claim: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": state_claim_name(name, member),
            "labels": member_labels(name, member),
            "ownerReferences": [owner_reference(app)],
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage.size}}},
    }
    if storage.storage_class_name:
        claim["spec"]["storageClassName"] = storage.storage_class_name
    return claim


def _app_meta(app: StreamApp, name: str) -> dict[str, Any]:
    """Metadata of an app-wide child (not tied to one member)."""
    return {
        "name": name,
        "labels": {APP_LABEL: app.metadata.name, **MANAGED_BY},
        "ownerReferences": [owner_reference(app)],
    }


def headless_service(app: StreamApp) -> dict[str, Any]:
    """Stable DNS names `<app>-<id>.<app>` for the members (metrics scraping, debugging)."""
    name = app.metadata.name
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _app_meta(app, name),
        "spec": {
            "clusterIP": "None",
            "selector": {APP_LABEL: name},
            "ports": [{"name": EXECUTOR_PORT_NAME, "port": EXECUTOR_PORT}],
            "publishNotReadyAddresses": True,
        },
    }


def disruption_budget(app: StreamApp) -> dict[str, Any]:
    """At most `rollingUpdate.maxUnavailable` members voluntarily disrupted at a time: evictions and
    node drains get the same budget of missing members as a rolling update, so neither can take more
    members away than the app was told it may lose."""
    name = app.metadata.name
    unavailable = app.spec.rolling_update.max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _app_meta(app, name),
        "spec": {"maxUnavailable": unavailable, "selector": {"matchLabels": {APP_LABEL: name}}},
    }


def account_of(app: StreamApp, member: int) -> str:
    """The ServiceAccount the member's executor runs as (`executor.serviceAccountScope`)."""
    if app.spec.executor.service_account_scope == "app":
        return shared_executor_account(app.metadata.name)
    return executor_account(app.metadata.name, member)


def executor_identity(app: StreamApp, member: int) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding of one member's executor: it may read its own target and
    pod and report its own status, nothing of any other member (`controller.permissions.executor_role_rules`)."""
    meta: dict[str, Any] = {
        "name": executor_account(app.metadata.name, member),
        "labels": member_labels(app.metadata.name, member),
        "ownerReferences": [owner_reference(app)],
    }
    rules = executor_role_rules(
        member_name(app.metadata.name, member), spark_driver=app.spec.executor.spark_executors is not None
    )
    return _identity(app, meta, rules)


def shared_executor_identity(app: StreamApp, members: Iterable[int]) -> list[dict[str, Any]]:
    """The one ServiceAccount, Role and RoleBinding all of the app's executors share
    (`serviceAccountScope: app`): the rights of each member's own identity, on every member in
    `members` (those wanted, holding tasks or with a pod; the Role follows as the app scales)."""
    meta = _app_meta(app, shared_executor_account(app.metadata.name))
    meta["labels"] = {**meta["labels"], SHARED_IDENTITY_LABEL: "true"}
    names = [member_name(app.metadata.name, m) for m in sorted(set(members))]
    return _identity(app, meta, executor_role_rules(names))


def _identity(app: StreamApp, meta: dict[str, Any], rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ServiceAccount (with the spec's workload-identity annotations), its Role and its binding."""
    account = meta["name"]
    annotations = dict(app.spec.executor.service_account_annotations or {})
    if annotations:  # workload identity; the keys are listed so that one dropped from the spec goes
        annotations[MANAGED_ANNOTATIONS] = ",".join(sorted(annotations))
    account_meta = {**meta, "annotations": annotations} if annotations else meta
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": account_meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account}],
        },
    ]


def _env(app: StreamApp, member: int) -> list[dict[str, Any]]:
    spec = app.spec
    plain = {
        "STREAMAPP_APP": app.metadata.name,
        "STREAMAPP_MEMBER_ID": str(member),
        "STREAMAPP_PARTITIONS": str(spec.partitions),
        "STREAMAPP_PIPELINE": json.dumps(spec.pipeline.to_dict(), sort_keys=True),
        "STREAMAPP_SPARK_CONF": json.dumps(spec.executor.spark_conf or {}, sort_keys=True),
        IMAGE_ENV: spec.executor.image,
        "STREAMAPP_STATE_DIR": STATE_MOUNT,
    }
    if spec.executor.spark_executors is not None:
        plain[SPARK_EXECUTORS_ENV] = json.dumps(spec.executor.spark_executors.to_dict(), sort_keys=True)
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in plain.items()]
    for var, path in (
        ("STREAMAPP_NAMESPACE", "metadata.namespace"),
        ("STREAMAPP_POD_NAME", "metadata.name"),
        ("STREAMAPP_POD_UID", "metadata.uid"),
        ("STREAMAPP_HTTP_ADDRESS", "status.podIP"),
    ):
        env.append({"name": var, "valueFrom": {"fieldRef": {"fieldPath": path}}})
    sink = spec.pipeline.sink.kafka if spec.pipeline.sink else None
    return (
        env
        + s3_env(spec.pipeline.state_store)
        + secret_env(spec.pipeline.source.kafka, "source")
        + secret_env(sink, "sink")
    )


def s3_env(store: StateStore) -> list[dict[str, Any]]:
    """The standard AWS variables an S3 state store needs in the pods (none for a file store).

    Credentials come from the named Secret through `secretKeyRef`, resolved by the kubelet: the
    executors' RBAC stays as it is (they never read Secrets through the API) and no secret value ever
    appears in the StreamApp or the pod spec. Without a Secret the SDK's default chain applies (pod
    identity, IRSA web identity, instance profile).
    """
    if not store.uri.startswith("s3://"):
        return []
    plain = {"AWS_ENDPOINT_URL_S3": store.endpoint, "AWS_REGION": store.region}
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in plain.items() if v]
    if store.credentials_secret:
        env += [
            {"name": key, "valueFrom": {"secretKeyRef": {"name": store.credentials_secret, "key": key}}}
            for key in S3_SECRET_KEYS
        ]
    return env
