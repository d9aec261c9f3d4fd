"""Hostile specs on the real API server, while a healthy app in the same namespace keeps reconciling.

Every spec below used to be accepted and then break something (a crash-looping executor, a PVC create
failing forever, an operator crash, a pod with rights its creator lacks). The API server now refuses
each with the field's name and the reason; the privilege requests a CRD cannot refuse (an install may
allow them) are refused by the operator: the app gets Degraded/InvalidSpec and a Warning Event, and
none of its children is created or touched.

Requests use strict field validation, as kubectl does by default, so a mistyped key is an error rather
than a dropped field.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from api_samples import app_body
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import APP, Operators, create_app, scale

from localcluster.waiting import wait_for
from streamapp.api.names import APP_LABEL, APPS, GROUP, MEMBERS, VERSION
from streamapp.api.streamapp import MAX_APP_NAME_LENGTH

TIMEOUT_S = 120.0
T = "spec.executor.podTemplate.spec"
APPARMOR_KEY = "container.apparmor.security.beta.kubernetes.io/executor"
Mutation = Callable[[dict[str, Any]], None]


def base(name: str) -> dict[str, Any]:
    return app_body(
        name,
        namespace=None,
        uid=None,
        state_store="file:///var/lib/streamapp",
        executor={"image": "streamapp/executor:dev"},
    )


def at(path: str, value: Any) -> Mutation:
    """Set a dotted path under the body (missing objects are created)."""

    def mutate(body: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = body
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return mutate


def template(**spec: Any) -> Mutation:
    return at("spec.executor.podTemplate", {"spec": spec})


def container(**security: Any) -> Mutation:
    return template(containers=[{"name": "executor", "securityContext": security}])


def rename(name: str) -> Mutation:
    return at("metadata.name", name)


# (id, mutation, field named in the message, reason in the message)
REFUSED_BY_THE_API_SERVER: list[tuple[str, Mutation, str, str]] = [
    (
        "kafka-source-without-topic",
        at("spec.pipeline.source.type", "kafka"),
        "spec.pipeline.source.kafka",
        "a kafka endpoint needs kafka (bootstrapServers and topic)",
    ),
    (
        "kafka-sink",
        at(
            "spec.pipeline.sink",
            {
                "type": "kafka",
                "kafka": {"bootstrapServers": "b:1", "topic": "t", "properties": {"sasl.password": "p"}},
            },
        ),
        "spec.pipeline.sink.kafka.properties",
        "secrets go in credentials (a Secret reference), never in properties",
    ),
    (
        "ftp-source",
        at("spec.pipeline.source.type", "ftp"),
        "spec.pipeline.source.type",
        "must be one of file",
    ),
    (
        "relative-source",
        at("spec.pipeline.source.path", "input"),
        "spec.pipeline.source.path",
        "must be absolute",
    ),
    (
        "relative-sink",
        at("spec.pipeline.sink", {"type": "file", "path": "out"}),
        "spec.pipeline.sink.path",
        "must be absolute",
    ),
    (
        "sourceless-path",
        at("spec.pipeline.source", {"type": "file"}),
        "spec.pipeline.source.path",
        "a file endpoint needs path",
    ),
    (
        "gs-store",
        at("spec.pipeline.stateStore.uri", "gs://bucket/app"),
        "spec.pipeline.stateStore.uri",
        "s3://",
    ),
    (
        "s3-options-on-a-file-store",
        at("spec.pipeline.stateStore.region", "eu-west-1"),
        "spec.pipeline.stateStore",
        "s3:// stores only",
    ),
    (
        "s3-inline-endpoint-path",
        at("spec.pipeline.stateStore", {"uri": "s3://bucket/app", "endpoint": "http://s3.local:9000/x"}),
        "spec.pipeline.stateStore.endpoint",
        "http(s)://host[:port]",
    ),
    (
        "relative-store",
        at("spec.pipeline.stateStore.uri", "state"),
        "spec.pipeline.stateStore.uri",
        "file:///",
    ),
    (
        "file-relative",
        at("spec.pipeline.stateStore.uri", "file://state"),
        "spec.pipeline.stateStore.uri",
        "file:///",
    ),
    (
        "bare-path-store",
        at("spec.pipeline.stateStore.uri", "/data/state"),
        "spec.pipeline.stateStore.uri",
        "file:///",
    ),
    ("pipeline-typo", at("spec.pipeline.mrege", "sum"), "spec.pipeline.mrege", "unknown field"),
    ("source-typo", at("spec.pipeline.source.pth", "/in"), "spec.pipeline.source.pth", "unknown field"),
    (
        "store-typo",
        at("spec.pipeline.stateStore.url", "file:///x"),
        "spec.pipeline.stateStore.url",
        "unknown field",
    ),
    ("bad-transform", at("spec.pipeline.transform", "nocolon"), "spec.pipeline.transform", "module:function"),
    ("size-lots", at("spec.executor.storage.size", "lots"), "spec.executor.storage.size", "quantity"),
    ("size-zero", at("spec.executor.storage.size", "0Gi"), "spec.executor.storage.size", "more than zero"),
    ("size-negative", at("spec.executor.storage.size", "-1Gi"), "spec.executor.storage.size", "quantity"),
    (
        "capacity-zero",
        at("spec.executor.memberCapacity", [{"member": 1, "cpu": "0m"}]),
        "spec.executor.memberCapacity[0].cpu",
        "more than zero",
    ),
    (
        "capacity-memory",
        at("spec.executor.memberCapacity", [{"member": 1, "cpu": "1Gi"}]),
        "spec.executor.memberCapacity[0].cpu",
        "CPU cores such as 2, 1.5 or 500m",
    ),
    ("image-empty", at("spec.executor.image", ""), "spec.executor.image", "image reference"),
    ("image-spaces", at("spec.executor.image", "my image"), "spec.executor.image", "image reference"),
    ("image-missing", at("spec.executor", {}), "spec.executor.image", "Required"),
    ("containers-string", template(containers="x"), f"{T}.containers", "must be of type array"),
    ("container-string", template(containers=["x"]), f"{T}.containers[0]", "must be of type object"),
    ("container-nameless", template(containers=[{"image": "i"}]), f"{T}.containers[0].name", "Required"),
    (
        "container-bad-name",
        template(containers=[{"name": "Side_Car", "image": "i"}]),
        f"{T}.containers[0].name",
        "DNS-1123",
    ),
    ("sidecar-imageless", template(containers=[{"name": "side"}]), f"{T}.containers[0].image", "needs image"),
    (
        "container-twice",
        template(containers=[{"name": "side", "image": "i"}, {"name": "side", "image": "j"}]),
        f"{T}.containers[1]",
        "Duplicate value",
    ),
    (
        "init-imageless",
        template(initContainers=[{"name": "init"}]),
        f"{T}.initContainers[0].image",
        "needs image",
    ),
    (
        "service-account-name",
        template(serviceAccountName="admin"),
        f"{T}.serviceAccountName",
        "own ServiceAccount",
    ),
    ("service-account", template(serviceAccount="admin"), f"{T}.serviceAccount", "own ServiceAccount"),
    (
        "automount",
        template(automountServiceAccountToken=False),
        f"{T}.automountServiceAccountToken",
        "identity",
    ),
    (
        "volume-state",
        template(volumes=[{"name": "state", "emptyDir": {}}]),
        f"{T}.volumes[0].name",
        "operator's own",
    ),
    (
        "volume-scratch",
        template(volumes=[{"name": "scratch", "emptyDir": {}}]),
        f"{T}.volumes[0].name",
        "operator's own",
    ),
    ("volume-nameless", template(volumes=[{"emptyDir": {}}]), f"{T}.volumes[0].name", "Required"),
    (
        "template-typo",
        at("spec.executor.podTemplate", {"spek": {}}),
        "spec.executor.podTemplate.spek",
        "unknown field",
    ),
    # Shapes that used to make every reconcile raise (the app stalled with no reason).
    (
        "env-nameless",
        template(containers=[{"name": "executor", "env": [{"value": "x"}]}]),
        f"{T}.containers[0].env[0].name",
        "Required",
    ),
    (
        "mount-pathless",
        template(containers=[{"name": "executor", "volumeMounts": [{"name": "v"}]}]),
        f"{T}.containers[0].volumeMounts[0].mountPath",
        "Required",
    ),
    (
        "grace-string",
        template(terminationGracePeriodSeconds="soon"),
        f"{T}.terminationGracePeriodSeconds",
        "must be of type integer",
    ),
    (
        "delay-unbounded",
        at("spec.rebalance", {"scheduledRebalanceMaxDelay": "100000h"}),
        "spec.rebalance.scheduledRebalanceMaxDelay",
        "must be at most 720h",
    ),
    (
        "handoff-unbounded",
        at("spec.rollingUpdate", {"handoffTimeout": "721h"}),
        "spec.rollingUpdate.handoffTimeout",
        "must be at most 720h",
    ),
    ("partitions-huge", at("spec.partitions", 10_000_000), "spec.partitions", "less than or equal to 100000"),
    ("partitions-int64", at("spec.partitions", 2**63 - 1), "spec.partitions", "less than or equal to 100000"),
    ("partitions-zero", at("spec.partitions", 0), "spec.partitions", "greater than or equal to 1"),
    ("replicas-huge", at("spec.replicas", 100_000), "spec.replicas", "less than or equal to 1000"),
    ("replicas-negative", at("spec.replicas", -1), "spec.replicas", "greater than or equal to 0"),
    ("replicas-string", at("spec.replicas", "3"), "spec.replicas", "must be of type integer"),
    (
        "too-many-copies",
        lambda b: b["spec"].update(partitions=100_000, replicas=10, rebalance={"standbyReplicas": 9}),
        "spec.rebalance.standbyReplicas",
        "must be <= 200000",
    ),
    ("name-dot", rename("my.app"), "metadata.name", "DNS-1035"),
    ("name-digit", rename("1app"), "metadata.name", "DNS-1035"),
    ("name-long", rename("a" * (MAX_APP_NAME_LENGTH + 1)), "metadata.name", f"at most {MAX_APP_NAME_LENGTH}"),
    ("name-upper", rename("MyApp"), "metadata.name", "RFC 1123"),
    ("name-spark-executor-pods", rename("x-0-exec"), "metadata.name", "-<number>-exec"),
    (
        "ephemeral-volume-like-a-state-claim",
        template(volumes=[{"name": "state-1", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]),
        f"{T}.volumes[0].name",
        "<pod>-<volume>",
    ),
]

# (id, mutation, field named in the condition) — accepted by the API server, refused by the operator.
REFUSED_BY_THE_OPERATOR: list[tuple[str, Mutation, str]] = [
    ("privileged", container(privileged=True), f"{T}.containers[0].securityContext.privileged"),
    (
        "escalation",
        container(allowPrivilegeEscalation=True),
        f"{T}.containers[0].securityContext.allowPrivilegeEscalation",
    ),
    (
        "capabilities",
        container(capabilities={"add": ["SYS_ADMIN"]}),
        f"{T}.containers[0].securityContext.capabilities.add",
    ),
    ("root-container", container(runAsUser=0), f"{T}.containers[0].securityContext.runAsUser"),
    ("root-pod", template(securityContext={"runAsUser": 0}), f"{T}.securityContext.runAsUser"),
    (
        "host-path",
        template(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        f"{T}.volumes[0].hostPath",
    ),
    ("host-network", template(hostNetwork=True), f"{T}.hostNetwork"),
    ("host-pid", template(hostPID=True), f"{T}.hostPID"),
    ("host-ipc", template(hostIPC=True), f"{T}.hostIPC"),
    (
        "host-port",
        template(
            containers=[{"name": "side", "image": "i", "ports": [{"containerPort": 80, "hostPort": 80}]}]
        ),
        f"{T}.containers[0].ports[0].hostPort",
    ),
    (
        "init-privileged",
        template(initContainers=[{"name": "init", "image": "i", "securityContext": {"privileged": True}}]),
        f"{T}.initContainers[0].securityContext.privileged",
    ),
    (
        "seccomp-unconfined",
        template(securityContext={"seccompProfile": {"type": "Unconfined"}}),
        f"{T}.securityContext.seccompProfile.type",
    ),
    (
        "apparmor-unconfined",
        container(appArmorProfile={"type": "Unconfined"}),
        f"{T}.containers[0].securityContext.appArmorProfile.type",
    ),
    (
        "apparmor-annotation",
        at("spec.executor.podTemplate", {"metadata": {"annotations": {APPARMOR_KEY: "unconfined"}}}),
        f"spec.executor.podTemplate.metadata.annotations[{APPARMOR_KEY}]",
    ),
    (
        "selinux-spc",
        container(seLinuxOptions={"type": "spc_t"}),
        f"{T}.containers[0].securityContext.seLinuxOptions.type",
    ),
    ("proc-unmasked", container(procMount="Unmasked"), f"{T}.containers[0].securityContext.procMount"),
    (
        "unsafe-sysctl",
        template(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "65536"}]}),
        f"{T}.securityContext.sysctls[0].name",
    ),
    *(
        (f"volume-{kind}", template(volumes=[{"name": "v", kind: source}]), f"{T}.volumes[0].{kind}")
        for kind, source in (
            ("nfs", {"server": "nfs.example", "path": "/"}),
            ("flexVolume", {"driver": "example/flex"}),
            ("iscsi", {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:t", "lun": 0}),
            ("cephfs", {"monitors": ["10.0.0.1:6789"]}),
            ("rbd", {"monitors": ["10.0.0.1:6789"], "image": "i"}),
            ("csi", {"driver": "inline.example"}),
        )
    ),
    ("node-name", template(nodeName="node-1"), f"{T}.nodeName"),
    (
        "sidecar-root",
        template(containers=[{"name": "side", "image": "i", "securityContext": {"runAsNonRoot": False}}]),
        f"{T}.containers[0].securityContext.runAsNonRoot",
    ),
    (
        "worst",
        template(
            containers=[{"name": "executor", "securityContext": {"privileged": True}}],
            volumes=[{"name": "root", "hostPath": {"path": "/"}}],
        ),
        f"{T}.volumes[0].hostPath",
    ),
]


def hostile(index: int, mutate: Mutation) -> dict[str, Any]:
    body = base(f"hostile-{index}")
    mutate(body)
    return body


def refusal(objects: client.CustomObjectsApi, namespace: str, body: dict[str, Any]) -> str:
    """The API server's message for a create that must fail (400 for strict decoding, else 422)."""
    with pytest.raises(ApiException) as refused:
        objects.create_namespaced_custom_object(
            GROUP, VERSION, namespace, APPS, body, field_validation="Strict"
        )
    assert refused.value.status in (400, 422), refused.value.body
    message: str = json.loads(refused.value.body)["message"]
    return message


def invalid_spec(objects: client.CustomObjectsApi, namespace: str, name: str) -> str | None:
    """The message of the app's Degraded condition while its reason is InvalidSpec."""
    status = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, name).get("status") or {}
    degraded = next((c for c in status.get("conditions") or [] if c["type"] == "Degraded"), None)
    if degraded and degraded["reason"] == "InvalidSpec" and degraded["status"] == "True":
        return str(degraded["message"])
    return None


def pods_of(core: client.CoreV1Api, namespace: str, app: str) -> dict[str, str]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"{APP_LABEL}={app}").items
    return {p.metadata.name: p.metadata.uid for p in pods}


def assigned(objects: client.CustomObjectsApi, namespace: str, member: str) -> dict[str, Any] | None:
    """The StreamAppMember once every task of its app is assigned to it."""
    try:
        body = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, member)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict(body) if len(body["spec"].get("active") or []) == 4 else None


def warnings(core: client.CoreV1Api, namespace: str, app: str) -> list[str]:
    events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={app}").items
    return [e.message for e in events if e.reason == "InvalidSpec" and e.type == "Warning"]


def test_hostile_specs_are_refused_while_a_healthy_app_reconciles(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    objects, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    assert len(REFUSED_BY_THE_API_SERVER) + len(REFUSED_BY_THE_OPERATOR) >= 80
    operators.start()
    create_app(api_client, namespace, replicas=1, partitions=4)
    wait_for(lambda: f"{APP}-0" in pods_of(core, namespace, APP), TIMEOUT_S, "the healthy app's first pod")

    # An app that already runs, then asks for privileges: refused without touching what it has.
    objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, base("victim"))
    before = wait_for(lambda: pods_of(core, namespace, "victim") or None, TIMEOUT_S, "victim-0")
    member_before = wait_for(lambda: assigned(objects, namespace, "victim-0"), TIMEOUT_S, "victim-0 assigned")
    privileged = base("victim")["spec"]
    container(privileged=True)({"spec": privileged})
    objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        APPS,
        "victim",
        {"spec": {"replicas": 2, "executor": privileged["executor"]}},
    )

    failures: list[str] = []
    for index, (case, mutate, field, reason) in enumerate(REFUSED_BY_THE_API_SERVER):
        message = refusal(objects, namespace, hostile(index, mutate))
        if field not in message or reason not in message:
            failures.append(f"{case}: expected {field!r} and {reason!r} in {message!r}")
    assert failures == [], "\n".join(failures)

    offset = len(REFUSED_BY_THE_API_SERVER)
    for index, (_case, mutate, _field) in enumerate(REFUSED_BY_THE_OPERATOR, start=offset):
        objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, hostile(index, mutate))
    for index, (case, _mutate, field) in enumerate(REFUSED_BY_THE_OPERATOR, start=offset):
        name = f"hostile-{index}"
        message = wait_for(
            lambda name=name: invalid_spec(objects, namespace, name), TIMEOUT_S, f"{case} refused"
        )
        assert field in message and "--allow-privileged-pod-templates" in message, (case, message)
        found = wait_for(lambda name=name: warnings(core, namespace, name), TIMEOUT_S, f"{case}'s Event")
        assert any(field in event for event in found), (case, found)
    victim = wait_for(lambda: invalid_spec(objects, namespace, "victim"), TIMEOUT_S, "the victim refused")
    assert f"{T}.containers[0].securityContext.privileged" in victim

    # The healthy app is still served: a scale is acted on after all of the above.
    scale(api_client, namespace, 3)
    wanted = {f"{APP}-{i}" for i in range(3)}
    wait_for(lambda: set(pods_of(core, namespace, APP)) == wanted, TIMEOUT_S, "the healthy app scaled to 3")
    wait_for(
        lambda: (
            (
                objects.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, APP).get("status") or {}
            ).get("replicas")
            == 3
        ),
        TIMEOUT_S,
        "the healthy app's status at 3 replicas",
    )

    # Refused apps got nothing: no pod, no member; the victim keeps exactly what it had.
    for index in range(offset, offset + len(REFUSED_BY_THE_OPERATOR)):
        assert pods_of(core, namespace, f"hostile-{index}") == {}
    members = objects.list_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS)["items"]
    member_names = {m["metadata"]["name"] for m in members}
    assert not any(n.startswith("hostile-") for n in member_names), member_names
    assert "victim-1" not in member_names
    assert pods_of(core, namespace, "victim") == before
    member_after = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, "victim-0")
    assert member_after["spec"] == member_before["spec"]
    assert member_after["metadata"]["generation"] == member_before["metadata"]["generation"]
