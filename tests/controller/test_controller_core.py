"""The controller's functional core: observation, child manifests and status, without an API server."""

from __future__ import annotations

import dataclasses
from typing import Any

from api_samples import app_body
from reports import digests, processing_members

from streamapp.api.names import RESTART_ANNOTATION, executor_account
from streamapp.api.streamapp import StreamApp, TaskCounts
from streamapp.controller import children, intent
from streamapp.controller.observe import PodState, member_views
from streamapp.controller.status import app_status, conditions, merge_conditions, step_patch
from streamapp.rebalance import AppConfig, Assignment, MemberView, member_targets, plan

APP: dict[str, Any] = app_body(uid="app-uid", generation=4, replicas=2, executor={"storage": {"size": "2Gi"}})
MODEL = StreamApp.from_resource(APP)


def pod(
    member: int, uid: str, ready: bool = True, deleting: bool = False, node: str = "n-a"
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"counts-{member}",
        "uid": uid,
        "labels": {"streamapp.dev/member": str(member)},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def member(member_id: int, pod_uid: str, generation: int, lags: dict[int, int]) -> dict[str, Any]:
    return {
        "spec": {"memberId": member_id, "generation": generation},
        "status": {
            "observedGeneration": generation,
            "podUID": pod_uid,
            "tasks": [{"task": t, "role": "warmup", "lag": lag} for t, lag in lags.items()],
        },
    }


def test_views_trust_lags_only_from_the_current_pod() -> None:
    views = member_views(
        pods=[pod(0, "p0"), pod(1, "p1-new")],
        members=[member(0, "p0", 3, {1: 50}), member(1, "p1-old", 3, {2: 0})],
        zones={"n-a": "zone-a"},
        wanted=2,
    )
    assert views[0].lags == {1: 50} and views[0].zone == "zone-a"
    assert views[1].lags == {}, "a report from before the restart was trusted"
    assert views[1].acked_generation == 3, "an acknowledgement from the old pod still counts"


def restarted_in_place(member_id: int, uid: str, started: str) -> dict[str, Any]:
    """A Ready pod whose executor container was restarted (its process killed) at `started`."""
    body = pod(member_id, uid)
    running = {"state": {"running": {"startedAt": started}}}
    body["status"]["containerStatuses"] = [{"name": "executor", "restartCount": 1, **running}]
    return body


def test_views_trust_lags_only_from_the_executor_that_runs_now() -> None:
    old = member(0, "p0", 3, {1: 0})
    old["status"]["startedAt"] = "2026-01-01T00:00:05Z"
    new = member(1, "p1", 4, {1: 80})
    new["status"]["startedAt"] = "2026-01-01T00:01:00Z"
    views = member_views(
        pods=[
            restarted_in_place(0, "p0", "2026-01-01T00:01:00Z"),
            restarted_in_place(1, "p1", "2026-01-01T00:01:00Z"),
        ],
        members=[old, new],
        zones={},
        wanted=2,
    )
    # the same pod, but the killed process's last report: every task caught up, nothing opened yet
    assert views[0].lags == {} and not views[0].reported, "a report from before the restart was trusted"
    assert views[0].acked_generation == 3
    assert views[1].lags == {1: 80} and views[1].reported
    unstamped = member(0, "p0", 3, {1: 7})
    views = member_views([restarted_in_place(0, "p0", "2026-01-01T00:01:00Z")], [unstamped], {}, wanted=1)
    assert views[0].lags == {1: 7}, "a report without startedAt (an older executor) counts by its pod"


def test_views_treat_unready_and_restarting_pods_as_not_alive() -> None:
    restarting = pod(1, "b", deleting=True)
    restarting["metadata"]["annotations"] = {RESTART_ANNOTATION: "true"}
    unready_leaving = pod(2, "c", ready=False, deleting=True)
    views = member_views([pod(0, "a", ready=False), restarting, unready_leaving], [], {}, wanted=4)
    assert [(v.id, v.alive) for v in views] == [(0, False), (1, False), (2, False), (3, False)]


def test_an_evicted_pod_is_finished_and_not_alive() -> None:
    evicted = pod(0, "a")
    evicted["status"]["phase"] = "Failed"
    evicted["status"]["reason"] = "Evicted"
    state = PodState.of(evicted)
    assert state is not None and state.finished and not state.alive


def test_pod_states_ignore_foreign_pods() -> None:
    assert PodState.of({"metadata": {"name": "x", "labels": {}}}) is None


def test_member_pod_manifest_carries_identity_volume_and_owner() -> None:
    manifest = children.pod(MODEL, 1)
    container = manifest["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert manifest["metadata"]["name"] == "counts-1"
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == "app-uid"
    assert env["STREAMAPP_MEMBER_ID"]["value"] == "1"
    assert env["STREAMAPP_POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
    assert manifest["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "counts-state-1"
    claim = children.state_claim(MODEL, 1)
    assert claim is not None and claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert container["command"] == ["streamapp", "executor", "--from-cluster"]


def test_without_a_volume_size_state_lives_in_an_empty_dir() -> None:
    body = {**APP, "spec": {**APP["spec"], "executor": {"image": "img"}}}
    model = StreamApp.from_resource(body)
    assert children.state_claim(model, 0) is None
    volumes = children.pod(model, 0)["spec"]["volumes"]
    assert volumes == [{"name": "state", "emptyDir": {}}, {"name": "scratch", "emptyDir": {}}]


def test_member_pods_run_restricted_as_the_executor_account_whatever_the_template_says() -> None:
    body = {**APP, "spec": {**APP["spec"], "executor": {"image": "img"}}}
    model = StreamApp.from_resource(body)
    # The CRD and the models refuse such a template; the pod is built right even if one got through.
    template = {"spec": {"serviceAccountName": "admin", "containers": [{"name": "executor"}]}}
    executor = dataclasses.replace(model.spec.executor, pod_template=template)
    model = dataclasses.replace(model, spec=dataclasses.replace(model.spec, executor=executor))
    spec = children.pod(model, 0)["spec"]
    assert spec["serviceAccountName"] == executor_account("counts", 0)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = spec["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "scratch", "mountPath": "/tmp"} in container["volumeMounts"]


def test_a_template_adds_to_the_restricted_defaults_but_never_drops_them() -> None:
    """A template's `securityContext: {}`, an executor securityContext of its own and a busybox
    sidecar: the pod still runs non-root with the uid and RuntimeDefault seccomp, the executor keeps a
    read-only root and no capability, and the sidecar (like init containers) gets no privilege
    escalation and every capability dropped; what the template sets is kept beside it."""
    body = {**APP, "spec": {**APP["spec"], "executor": {"image": "img"}}}
    model = StreamApp.from_resource(body)
    template = {
        "spec": {
            "securityContext": {},
            "containers": [
                {
                    "name": "executor",
                    "securityContext": {"runAsUser": 1000, "capabilities": {"drop": ["NET_RAW"]}},
                },
                {"name": "side", "image": "busybox"},
            ],
            "initContainers": [
                {"name": "init", "image": "busybox", "securityContext": {"readOnlyRootFilesystem": True}}
            ],
        }
    }
    executor = dataclasses.replace(model.spec.executor, pod_template=template)
    model = dataclasses.replace(model, spec=dataclasses.replace(model.spec, executor=executor))
    spec = children.pod(model, 0)["spec"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    ours, side = spec["containers"]
    assert ours["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL", "NET_RAW"]},
        "runAsUser": 1000,
    }
    assert side["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    [init] = spec["initContainers"]
    assert init["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def test_member_spec_lists_the_target_and_compares_without_generation() -> None:
    result = plan(AppConfig(4, 2), [MemberView(0), MemberView(1)], Assignment(), 0.0)
    spec = children.member_spec("counts", 0, member_targets(result.assignment)[0], 1, False, ())
    assert [t["epoch"] for t in spec["active"]] == [1, 1]
    assert children.same_target(spec, {**spec, "generation": 7})
    assert not children.same_target(spec, {**spec, "warmup": [3]})


def test_status_counts_conditions_and_intent() -> None:
    views = [MemberView(0), MemberView(1)]
    result = plan(AppConfig(4, 2), views, Assignment(), 0.0)
    pods = {
        0: PodState(0, "counts-0", "a", True, False, None),
        1: PodState(1, "counts-1", "b", True, False, None),
    }
    members = processing_members(result.assignment, pods)
    status = step_patch(
        app_status(MODEL, result, Assignment(), views, pods, "2026-01-01T00:00:00Z", digests(members))
    )
    assert status["tasks"] == {"active": 4, "revoking": 0, "warming": 0, "reserved": 0, "unassigned": 0}
    assert status["readyReplicas"] == 2 and status["selector"] == "streamapp.dev/app=counts"
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["observedGeneration"] == 4
    assert intent.decode(status["intent"]) == result.assignment


def test_ready_pods_are_not_enough_every_owner_must_confirm_its_tasks() -> None:
    views = [MemberView(0), MemberView(1)]
    result = plan(AppConfig(4, 2), views, Assignment(), 0.0)
    pods = {m: PodState(m, f"counts-{m}", f"uid-{m}", True, False, None) for m in (0, 1)}
    members = processing_members(result.assignment, pods)
    members[1]["status"]["observedGeneration"] = 0  # member 1 has not applied its target yet
    status = step_patch(
        app_status(MODEL, result, Assignment(), views, pods, "2026-01-01T00:00:00Z", digests(members))
    )
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["reason"] == "TasksNotConfirmed"
    assert "2 not yet confirmed" in conditions["Ready"]["message"]
    assert conditions["Degraded"]["status"] == "False"
    silent = step_patch(app_status(MODEL, result, Assignment(), views, pods, "2026-01-01T00:00:00Z", []))
    assert next(c for c in silent["conditions"] if c["type"] == "Ready")["status"] == "False"


def test_condition_transition_time_moves_only_on_a_flip() -> None:
    counts = TaskCounts(active=4)
    first = merge_conditions([], conditions(counts, 2, 2, False), "t1", 1)
    again = merge_conditions(first, conditions(counts, 2, 2, False), "t2", 1)
    held = dataclasses.replace(counts, reserved=2)
    flipped = merge_conditions(again, conditions(held, 2, 1, False), "t3", 1)
    assert [c.last_transition_time for c in again] == ["t1", "t1", "t1"]
    assert {c.type: c.last_transition_time for c in flipped} == {
        "Ready": "t3",
        "Rebalancing": "t1",
        "Degraded": "t3",
    }


def test_a_template_container_named_executor_refines_ours() -> None:
    template = {
        "spec": {
            "containers": [
                {
                    "name": "executor",
                    "env": [{"name": "STREAMAPP_HTTP_PORT", "value": "0"}],
                    "readinessProbe": None,
                },
                {"name": "sidecar", "image": "s"},
            ]
        }
    }
    body = {**APP, "spec": {**APP["spec"], "executor": {"image": "img", "podTemplate": template}}}
    containers = children.pod(StreamApp.from_resource(body), 0)["spec"]["containers"]
    assert [c["name"] for c in containers] == ["executor", "sidecar"]
    env = {e["name"]: e for e in containers[0]["env"]}
    assert env["STREAMAPP_HTTP_PORT"]["value"] == "0" and "STREAMAPP_MEMBER_ID" in env
    # A null is absent (api/podtemplate.py): it keeps our probe rather than dropping it.
    assert containers[0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
