"""The operator's own refusals: pod templates that ask for privileges, unless the install allows them;
and the status size at the CRD's maxima, which is why those maxima are what they are."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import replace
from typing import Any

import pytest
from api_samples import app_model
from test_reconcile_memo import settled_app

from streamapp.api import StreamApp, ValidationError
from streamapp.api.streamapp import MAX_PARTITIONS, MAX_REPLICAS, MAX_TASK_COPIES
from streamapp.controller.admission import STRICT, PodPolicy, admit
from streamapp.controller.metrics import Metrics
from streamapp.controller.observe import PodState
from streamapp.controller.reconcile import reconcile
from streamapp.controller.status import app_status, step_patch
from streamapp.rebalance import Assignment, MemberView, Plan, TaskAssignment

MIB = 1_048_576
T = "spec.executor.podTemplate.spec"


def app_with(spec: dict[str, Any]) -> StreamApp:
    return app_with_template({"spec": spec})


def app_with_template(template: dict[str, Any]) -> StreamApp:
    return app_model(uid=None, replicas=3, executor={"podTemplate": template})


def container(**security: Any) -> dict[str, Any]:
    return {"containers": [{"name": "executor", "securityContext": security}]}


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (container(privileged=True), f"{T}.containers[0].securityContext.privileged"),
        (
            container(allowPrivilegeEscalation=True),
            f"{T}.containers[0].securityContext.allowPrivilegeEscalation",
        ),
        (container(runAsUser=0), f"{T}.containers[0].securityContext.runAsUser"),
        (
            container(capabilities={"add": ["SYS_ADMIN"]}),
            f"{T}.containers[0].securityContext.capabilities.add",
        ),
        (
            container(windowsOptions={"hostProcess": True}),
            f"{T}.containers[0].securityContext.windowsOptions.hostProcess",
        ),
        (
            {"initContainers": [{"name": "init", "image": "i", "securityContext": {"privileged": True}}]},
            f"{T}.initContainers[0].securityContext.privileged",
        ),
        (
            {
                "containers": [
                    {"name": "side", "image": "i", "ports": [{"containerPort": 80, "hostPort": 80}]}
                ]
            },
            f"{T}.containers[0].ports[0].hostPort",
        ),
        ({"securityContext": {"runAsUser": 0}}, f"{T}.securityContext.runAsUser"),
        ({"hostNetwork": True}, f"{T}.hostNetwork"),
        ({"hostPID": True}, f"{T}.hostPID"),
        ({"hostIPC": True}, f"{T}.hostIPC"),
        ({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, f"{T}.volumes[0].hostPath"),
        # What the denylist let through: the restricted profile, as an allowlist.
        (
            {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
            f"{T}.securityContext.seccompProfile.type",
        ),
        (
            container(seccompProfile={"type": "Unconfined"}),
            f"{T}.containers[0].securityContext.seccompProfile.type",
        ),
        (
            container(appArmorProfile={"type": "Unconfined"}),
            f"{T}.containers[0].securityContext.appArmorProfile.type",
        ),
        (
            container(seLinuxOptions={"type": "spc_t"}),
            f"{T}.containers[0].securityContext.seLinuxOptions.type",
        ),
        (
            container(seLinuxOptions={"user": "system_u"}),
            f"{T}.containers[0].securityContext.seLinuxOptions.user",
        ),
        (container(procMount="Unmasked"), f"{T}.containers[0].securityContext.procMount"),
        (container(runAsNonRoot=False), f"{T}.containers[0].securityContext.runAsNonRoot"),
        (
            {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}},
            f"{T}.securityContext.sysctls[0].name",
        ),
        *[
            ({"volumes": [{"name": "v", kind: source}]}, f"{T}.volumes[0].{kind}")
            for kind, source in (
                ("nfs", {"server": "s", "path": "/"}),
                ("flexVolume", {"driver": "d"}),
                ("iscsi", {"targetPortal": "p", "iqn": "q", "lun": 0}),
                ("cephfs", {"monitors": ["m"]}),
                ("rbd", {"monitors": ["m"], "image": "i"}),
                ("csi", {"driver": "secrets-store.csi.k8s.io"}),
            )
        ],
        ({"nodeName": "node-a"}, f"{T}.nodeName"),
        (
            {
                "initContainers": [
                    {
                        "name": "init",
                        "image": "i",
                        "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
                    }
                ]
            },
            f"{T}.initContainers[0].securityContext.capabilities.add",
        ),
    ],
)
def test_privilege_requests_are_refused_unless_allowed(spec: dict[str, Any], path: str) -> None:
    model = app_with(spec)
    with pytest.raises(ValidationError) as raised:
        admit(model, STRICT)
    assert raised.value.path == path
    assert "--allow-privileged-pod-templates" in str(raised.value)
    admit(model, PodPolicy(allow_privileged=True))


@pytest.mark.parametrize(
    "spec",
    [
        {},
        container(privileged=False, allowPrivilegeEscalation=False, runAsUser=65532),
        container(capabilities={"drop": ["ALL"]}),
        {"securityContext": {"fsGroup": 65532, "runAsNonRoot": True}, "hostNetwork": False},
        {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]},
        {"containers": [{"name": "side", "image": "i", "ports": [{"containerPort": 80}]}]},
        {"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}},
        container(capabilities={"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}, procMount="Default"),
        container(seLinuxOptions={"type": "container_t", "level": "s0:c1,c2"}),
        {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}]}},
        {
            "volumes": [
                {"name": name, kind: {}}
                for name, kind in (
                    ("a", "configMap"),
                    ("b", "secret"),
                    ("c", "projected"),
                    ("d", "downwardAPI"),
                    ("e", "emptyDir"),
                )
            ]
        },
    ],
)
def test_unprivileged_templates_pass(spec: dict[str, Any]) -> None:
    admit(app_with(spec), STRICT)


def test_apparmor_by_annotation_is_held_to_the_same_rule() -> None:
    def annotated(value: str) -> StreamApp:
        key = "container.apparmor.security.beta.kubernetes.io/executor"
        return app_with_template({"metadata": {"annotations": {key: value}}})

    with pytest.raises(ValidationError) as raised:
        admit(annotated("unconfined"), STRICT)
    assert raised.value.path.endswith("annotations[container.apparmor.security.beta.kubernetes.io/executor]")
    admit(annotated("runtime/default"), STRICT)
    admit(annotated("localhost/k8s-apparmor-example"), STRICT)


def test_status_at_the_maxima_fits_in_one_object() -> None:
    """The bound behind MAX_PARTITIONS/MAX_REPLICAS/MAX_TASK_COPIES: the status the operator writes for
    the largest app the CRD accepts stays under 1 MiB — even when every owner, standby and epoch is
    scattered at random, which compresses worst (a planned app's intent takes kilobytes)."""
    assert MAX_TASK_COPIES == 2 * MAX_PARTITIONS, "one standby per task at the maxima"
    rnd = random.Random(12)
    tasks = tuple(
        TaskAssignment(
            active=owner,
            epoch=rnd.randrange(1, 1_000),
            standbys=((owner + rnd.randrange(1, MAX_REPLICAS)) % MAX_REPLICAS,),
        )
        for owner in (rnd.randrange(MAX_REPLICAS) for _ in range(MAX_PARTITIONS))
    )
    scattered = Assignment(generation=10**6, tasks=tasks, membership=tuple(range(MAX_REPLICAS)))
    result = Plan(scattered, changed=True, wake_at=None, events=(), removable=(), reason="ScaleOut")
    views = [MemberView(i) for i in range(MAX_REPLICAS)]
    pods = {i: PodState(i, f"counts-{i}", f"uid-{i}", True, False, None) for i in range(MAX_REPLICAS)}
    largest = app_model("a" * 53, generation=1, replicas=MAX_REPLICAS, partitions=MAX_PARTITIONS)
    status = step_patch(app_status(largest, result, Assignment(), views, pods, "2026-01-01T00:00:00Z"))
    size = len(json.dumps(status, separators=(",", ":")))
    assert size < 0.8 * MIB, size


def test_a_running_app_the_rules_now_refuse_keeps_its_pods_and_is_degraded() -> None:
    """An operator upgrade that brings stricter rules must not take down an app that runs: its next
    reconcile touches no child (no pod deleted, created or rolled) and says why in its conditions."""
    kube, observed, memo, _ = settled_app()
    kube.writes.clear()
    app = copy.deepcopy(kube.app)
    app["spec"]["executor"]["podTemplate"] = {"spec": {"hostNetwork": True}}
    reconcile(kube, replace(observed, app=app), 30.0, Metrics(), memo=memo)  # type: ignore[arg-type]
    assert [name for name, _ in kube.writes] == ["event", "patch_app_status"]
    conditions = {c["type"]: c for c in kube.writes[1][1]["conditions"]}
    assert conditions["Degraded"]["status"] == "True"
    assert conditions["Degraded"]["reason"] == "InvalidSpec"
    assert f"{T}.hostNetwork" in conditions["Degraded"]["message"]
