"""The operator against the real control plane: the scenarios of the operator milestone.

The operator runs as a real `streamapp operator` process; member pods run on kwok nodes and their
executors are played by the fleet (real membership clients, simulated restore progress). The fleet
checks single ownership and warm handoffs at every apply; tests check what users see.
"""

from __future__ import annotations

import time

import pytest
from fleet import Fleet, member_statuses
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import APP, Operators, app, create_app, patch_app, reasons, scale

from kubesetup import kwok_app
from localcluster.waiting import wait_for
from streamapp.api.names import APPS, GROUP, VERSION


def owners(fleet: Fleet) -> dict[int, int]:
    """task → member, from what the executors are actually applying."""
    return {task: member for member, target in fleet.targets().items() for task in target.active_epochs()}


def replaced(api: client.ApiClient, namespace: str, old_uid: str) -> bool:
    """Whether member 1 has a pod again, another than the one of `old_uid`."""
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, field_selector=f"metadata.name={APP}-1").items
    return bool(pods) and pods[0].metadata.uid != old_uid


def balanced(api: client.ApiClient, namespace: str, fleet: Fleet, replicas: int, partitions: int) -> bool:
    """Stable: every task active on exactly one live member, spread ≤ 1, nothing in flight, Ready."""
    status = app(api, namespace).get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    current = owners(fleet)
    counts = [list(current.values()).count(m) for m in range(replicas)]
    return (
        len(current) == partitions
        and set(current.values()) <= set(range(replicas))
        and max(counts) - min(counts) <= 1
        and conditions.get("Ready") == "True"
        and conditions.get("Rebalancing") == "False"
    )


def degraded_because(api: client.ApiClient, namespace: str, reason: str) -> str | None:
    """The app's Degraded message when its reason is `reason`, else None."""
    conditions = (app(api, namespace).get("status") or {}).get("conditions") or []
    degraded = next((c for c in conditions if c["type"] == "Degraded"), {})
    return str(degraded.get("message")) if degraded.get("reason") == reason else None


def lose_member_2_for_good(api: client.ApiClient, namespace: str, fleet: Fleet) -> set[int]:
    """Member 2's pod deleted, its replacement never schedulable (so never Ready): the tasks it owned."""
    lost = {t for t, m in owners(fleet).items() if m == 2}
    patch_app(
        api,
        namespace,
        {"spec": {"executor": {"podTemplate": {"spec": {"nodeSelector": {"streamapp.dev/none": "x"}}}}}},
    )
    client.CoreV1Api(api).delete_namespaced_pod(f"{APP}-2", namespace, grace_period_seconds=0)
    return lost


def moved_off(fleet: Fleet, lost: set[int]) -> bool:
    """Whether every one of `lost` is active on a member other than 2."""
    current = owners(fleet)
    return all(current.get(t) not in (None, 2) for t in lost)


def assert_clean(fleet: Fleet) -> None:
    assert fleet.violations.double_owned == [], fleet.violations.double_owned
    assert fleet.violations.cold_handoffs == [], fleet.violations.cold_handoffs


def test_create_balances_tasks_and_reports_ready(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    operators.start()
    create_app(api_client, namespace, replicas=3, partitions=12)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 3, 12), 90, "a balanced, Ready app")
        status = app(api_client, namespace)["status"]
        assert status["replicas"] == 3 and status["readyReplicas"] == 3
        assert status["selector"] == f"streamapp.dev/app={APP}"
        assert status["tasks"]["active"] == 12 and status["tasks"]["unassigned"] == 0
        assert {m["spec"]["memberId"] for m in member_statuses(api_client, namespace)} == {0, 1, 2}
        pods = client.CoreV1Api(api_client).list_namespaced_pod(namespace).items
        assert sorted(p.metadata.name for p in pods) == [f"{APP}-0", f"{APP}-1", f"{APP}-2"]
        assert all(p.metadata.owner_references[0].kind == "StreamApp" for p in pods)
        assert_clean(fleet)


def test_scale_out_warms_up_then_hands_over(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    operators.start()
    create_app(api_client, namespace, replicas=3, partitions=12, maxWarmupReplicas=2)
    with Fleet(api_client, namespace, APP, restore_rate=5_000) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 3, 12), 90, "a balanced app at 3")
        before = owners(fleet)
        scale(api_client, namespace, 6)
        warmed: set[int] = set()

        def settled() -> bool:
            for target in fleet.targets().values():
                warmed.update(target.warmup)
            return balanced(api_client, namespace, fleet, 6, 12)

        wait_for(settled, 180, "a balanced app at 6")
        after = owners(fleet)
        moved = {t for t in after if after[t] != before[t]}
        assert len(moved) == 6, f"moved {sorted(moved)}"
        assert moved <= warmed, "a task moved without a warmup"
        assert_clean(fleet)


def test_member_bounce_keeps_its_tasks(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """`lostTaskRecovery: delay`: a member whose pod is deleted and re-created keeps its tasks (static
    membership); nothing moves, no epoch changes."""
    operators.start()
    create_app(api_client, namespace, replicas=3, partitions=9, lostTaskRecovery="delay")
    core = client.CoreV1Api(api_client)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 3, 9), 90, "a balanced app")
        before = owners(fleet)
        epochs = {t: e for target in fleet.targets().values() for t, e in target.active_epochs().items()}
        old_uid = core.read_namespaced_pod(f"{APP}-1", namespace).metadata.uid
        reassigned = reasons(api_client, namespace).count("TasksReassigned")
        core.delete_namespaced_pod(f"{APP}-1", namespace, grace_period_seconds=0)

        wait_for(
            lambda: replaced(api_client, namespace, old_uid) and balanced(api_client, namespace, fleet, 3, 9),
            90,
            "member 1 back with its tasks",
        )
        wait_for(
            lambda: {"MemberLost", "MemberReturned"} <= set(reasons(api_client, namespace)),
            30,
            "lost/returned events",
        )
        assert owners(fleet) == before
        assert {
            t: e for target in fleet.targets().values() for t, e in target.active_epochs().items()
        } == epochs
        assert reasons(api_client, namespace).count("TasksReassigned") == reassigned, "a task moved"
        assert_clean(fleet)


def test_member_that_never_returns_loses_its_tasks_after_the_delay(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    operators.start()
    create_app(
        api_client,
        namespace,
        replicas=3,
        partitions=9,
        scheduledRebalanceMaxDelay="8s",
        standbyReplicas=1,
        failoverToStandby=False,
        lostTaskRecovery="delay",
    )
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 3, 9), 90, "a balanced app")
        lost = lose_member_2_for_good(api_client, namespace, fleet)
        wait_for(lambda: moved_off(fleet, lost), 60, "member 2's tasks taken over after the delay")
        takeovers = {t: lag for t, _member, lag in fleet.takeovers if t in lost}
        assert set(takeovers) == lost
        assert all(lag is not None and lag <= 10_000 for lag in takeovers.values()), (
            f"cold takeover: {takeovers}"
        )
        assert_clean(fleet)


def test_a_member_that_cannot_come_back_has_its_tasks_restored_at_once(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """`lostTaskRecovery: auto` (the default) on the real API server: member 2's replacement pod can
    never be scheduled, so it is not visibly coming back; its tasks are restored on the others at once
    and taken over as soon as a copy caught up — long before the 5-minute delay — and the app's status
    and Events say why."""
    operators.start()
    create_app(api_client, namespace, replicas=3, partitions=9)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 3, 9), 90, "a balanced app")
        lost = lose_member_2_for_good(api_client, namespace, fleet)
        wait_for(
            lambda: moved_off(fleet, lost), 60, "member 2's tasks restored elsewhere (the delay is 5 min)"
        )

        def said() -> dict[str, str] | None:
            """The app's Events by reason, once the takeover's own is posted (with the status that
            records the step, before its targets go out; waited for all the same)."""
            events = client.CoreV1Api(api_client).list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={APP}"
            )
            found = {e.reason: e.message for e in events.items}
            return found if "RestoredElsewhere" in found else None

        posted = wait_for(said, 60, "the RestoredElsewhere Event")
        # Its pod is first missing (on its way back, but overdue at once: kwok pods start in no time),
        # then never scheduled (not visibly coming back): restored either way.
        assert posted.get("RestoringElsewhere", "").startswith("member 2: restoring elsewhere: "), posted
        takeovers = {t: lag for t, _member, lag in fleet.takeovers if t in lost}
        assert set(takeovers) == lost
        assert_clean(fleet)
        # the single-owner check judged each of them by the order of the pod's end and the takeover
        assert lost <= fleet.handed_on, f"judged {sorted(fleet.handed_on)} of {sorted(lost)}"


def test_a_wiped_intent_neither_sends_the_generation_back_nor_stalls_a_scale_out(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """status.intent set to null on a running app (a status restored without it), then a scale-out:
    the operator rebuilds the intent from the members' targets (a Warning Event says so) and plans
    above the generation every executor applied, so the executors follow the scale-out and no task is
    ever active on two members. Planned from nothing, the generation went back to 1: the executors
    ignored every target, and revocations counted as acknowledged at once."""
    operators.start()
    create_app(api_client, namespace, replicas=3, partitions=6)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 3, 6), 90, "a balanced app")
        before = int(app(api_client, namespace)["status"]["generation"])
        client.CustomObjectsApi(api_client).patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, APPS, APP, {"status": {"intent": None}}
        )
        scale(api_client, namespace, 4)
        wait_for(lambda: balanced(api_client, namespace, fleet, 4, 6), 120, "a balanced app at 4")
        assert int(app(api_client, namespace)["status"]["generation"]) > before
        assert "IntentRebuilt" in reasons(api_client, namespace)
        assert_clean(fleet)


def test_a_name_taken_by_someone_elses_object_is_a_conflict_never_used(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """A ServiceAccount named like member 0's (say one bound to `edit`) exists before the app: the
    operator neither runs member 0's executor as it nor deletes it; the app says NameConflict naming
    it, in its Degraded condition and a Warning Event. Once it is removed the app comes up."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": f"{APP}-0"}})
    operators.start()
    create_app(api_client, namespace, replicas=1, partitions=2)

    def conflict() -> str | None:
        return degraded_because(api_client, namespace, "NameConflict")

    message = wait_for(conflict, 60, "the NameConflict condition")
    assert f"ServiceAccount {namespace}/{APP}-0 already exists and is not this app's" in message
    assert "NameConflict" in reasons(api_client, namespace)
    pods = [p.metadata.name for p in core.list_namespaced_pod(namespace).items]
    assert f"{APP}-0" not in pods, "a pod ran as the foreign ServiceAccount"
    account = core.read_namespaced_service_account(f"{APP}-0", namespace)
    assert not account.metadata.owner_references, "the operator adopted the foreign ServiceAccount"
    core.delete_namespaced_service_account(f"{APP}-0", namespace)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(
            lambda: balanced(api_client, namespace, fleet, 1, 2), 120, "the app up once the name is free"
        )
        assert conflict() is None
        assert_clean(fleet)


def test_a_member_pod_the_api_server_refuses_is_the_apps_condition_and_nothing_is_created(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """An install that lets templates ask for privileges (--allow-privileged-pod-templates), in a
    namespace whose Pod Security admission enforces `restricted`: the operator puts the member pod to
    the API server first (a dry run), so the app says PodRefused with the admission's own message and
    no pod is created; with the template fixed, the app comes up."""
    core = client.CoreV1Api(api_client)
    core.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    operators.start(extra=("--allow-privileged-pod-templates",))
    body = kwok_app(APP, 1, 2, "streamapp/executor:dev", scheduledRebalanceMaxDelay="5m")
    sidecar = {"name": "debug", "image": "busybox", "securityContext": {"privileged": True}}
    body["spec"]["executor"]["podTemplate"] = {"spec": {"containers": [sidecar]}}
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, body)

    def refusal() -> str | None:
        return degraded_because(api_client, namespace, "PodRefused")

    message = wait_for(refusal, 60, "the PodRefused condition")
    assert "the API server refuses the member pod" in message and "restricted" in message, message
    assert "PodRefused" in reasons(api_client, namespace)
    assert not core.list_namespaced_pod(namespace).items, "a pod was created"
    patch_app(api_client, namespace, {"spec": {"executor": {"podTemplate": {"spec": {"containers": None}}}}})
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(
            lambda: balanced(api_client, namespace, fleet, 1, 2), 120, "the app up with the template fixed"
        )
        assert refusal() is None


def test_a_member_whose_pod_a_quota_refuses_loses_its_tasks_and_one_event_says_why(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """A balanced app of two members; the namespace quota is lowered to one pod and member 1's pod
    deleted. Its replacement is refused on create (the dry run, made once per revision, passed: a
    quota counts only what exists), and member 1's tasks are restored on member 0 (that the engine
    counts such a member silent is `test_lost_task_figures`). The app says PodRefused with the quota's
    own message, and the operator posts an Event only when that message changes, however many
    reconciles meet it again (a large run had posted one every second, 421 in all). With the quota
    raised, the pod is created, the app balances again and the condition clears."""
    core = client.CoreV1Api(api_client)
    quota = {"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "2"}}}
    core.create_namespaced_resource_quota(namespace, quota)
    wait_for(
        lambda: (core.read_namespaced_resource_quota("pods", namespace).status.used or {}).get("pods") == "0",
        60,
        "the quota counted by the controller-manager",
    )
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=4)

    def refusal() -> str | None:
        return degraded_because(api_client, namespace, "PodRefused")

    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 2, 4), 120, "a balanced app of two")
        core.patch_namespaced_resource_quota("pods", namespace, {"spec": {"hard": {"pods": "1"}}})
        core.delete_namespaced_pod(f"{APP}-1", namespace, grace_period_seconds=0)
        message = wait_for(refusal, 120, "the PodRefused condition")
        assert "member 1's Pod" in message and "exceeded quota" in message, message
        wait_for(
            lambda: set(owners(fleet).values()) == {0} and len(owners(fleet)) == 4,
            120,
            "member 1's tasks restored on member 0",
        )
        # The quota's message names its "used" count, which falls to 1 once the controller-manager no
        # longer counts the deleted pod: an Event per message, so count from the settled one on.
        wait_for(lambda: "used: pods=1" in (refusal() or ""), 120, "the refusal with the quota settled")
        before = reasons(api_client, namespace).count("PodRefused")
        for delay in ("4m", "3m", "2m"):  # three more reconciles, each meeting the refusal again
            patch_app(api_client, namespace, {"spec": {"rebalance": {"scheduledRebalanceMaxDelay": delay}}})
            generation = app(api_client, namespace)["metadata"]["generation"]
            wait_for(
                lambda generation=generation: (
                    (app(api_client, namespace).get("status") or {}).get("observedGeneration") == generation
                    and refusal() is not None
                ),
                60,
                f"generation {generation} reconciled",
            )
        posted = reasons(api_client, namespace)
        assert posted.count("PodRefused") == before and "ReconcileFailed" not in posted, posted
        core.patch_namespaced_resource_quota("pods", namespace, {"spec": {"hard": {"pods": "2"}}})
        wait_for(
            lambda: balanced(api_client, namespace, fleet, 2, 4), 180, "the app up once the quota allows"
        )
        assert refusal() is None


def test_scale_in_drains_before_removing(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    operators.start()
    create_app(api_client, namespace, replicas=6, partitions=12)
    core = client.CoreV1Api(api_client)
    with Fleet(api_client, namespace, APP, restore_rate=5_000) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 6, 12), 120, "a balanced app at 6")
        scale(api_client, namespace, 3)

        def drained() -> bool:
            names = {p.metadata.name for p in core.list_namespaced_pod(namespace).items}
            members = {m["spec"]["memberId"] for m in member_statuses(api_client, namespace)}
            return (
                names == {f"{APP}-{i}" for i in range(3)}
                and members == {0, 1, 2}
                and balanced(api_client, namespace, fleet, 3, 12)
            )

        wait_for(drained, 180, "members 3-5 drained, their pods and StreamAppMembers removed")
        assert_clean(fleet)


def test_operator_killed_mid_rebalance_resumes(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    first = operators.start("op-1")
    create_app(api_client, namespace, replicas=2, partitions=8, maxWarmupReplicas=1)
    with Fleet(api_client, namespace, APP, restore_rate=2_000) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 2, 8), 90, "a balanced app")
        generation = app(api_client, namespace)["status"]["generation"]
        scale(api_client, namespace, 4)
        wait_for(lambda: any(t.warmup for t in fleet.targets().values()), 60, "warmups under way")
        first.kill()
        operators.start("op-2")
        wait_for(lambda: balanced(api_client, namespace, fleet, 4, 8), 180, "a balanced app at 4")
        assert app(api_client, namespace)["status"]["generation"] > generation
        assert_clean(fleet)


def test_only_the_leader_acts_and_a_successor_takes_over(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    one = operators.start("op-1", leader_election=True)
    wait_for(lambda: _holder(api_client, namespace) == "op-1", 30, "op-1 holding the lease")
    two = operators.start("op-2", leader_election=True)
    create_app(api_client, namespace, replicas=2, partitions=6)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 2, 6), 90, "a balanced app")
        assert _holder(api_client, namespace) == "op-1"
        assert "acquired lease" not in two.log.read_text()
        one.kill()
        wait_for(lambda: _holder(api_client, namespace) == "op-2", 60, "op-2 taking the lease over")
        scale(api_client, namespace, 3)
        wait_for(lambda: balanced(api_client, namespace, fleet, 3, 6), 120, "the successor rebalancing to 3")
        assert_clean(fleet)


def test_after_sigterm_the_other_replica_takes_over_within_five_seconds(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """A rollout of the operator SIGTERMs the leader: it stops acting, releases the Lease, and the
    other replica (retrying every 2 s) holds it within 5 s — measured 6.9 s when the release waited
    on the reconcile in flight."""
    one = operators.start("op-1", leader_election=True)
    wait_for(lambda: _holder(api_client, namespace) == "op-1", 30, "op-1 holding the lease")
    operators.start("op-2", leader_election=True)
    create_app(api_client, namespace, replicas=2, partitions=6)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 2, 6), 90, "a balanced app")
        one.process.terminate()
        began = time.monotonic()
        wait_for(lambda: _holder(api_client, namespace) == "op-2", 30, "op-2 taking the lease over", 0.05)
        assert time.monotonic() - began <= 5.0
        assert one.process.wait(15) == 0


def _holder(api: client.ApiClient, namespace: str) -> str | None:
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease("streamapp-operator", namespace)
    except ApiException:
        return None
    return lease.spec.holder_identity


def test_invalid_partitions_change_is_refused(
    api_client: client.ApiClient, namespace: str, crds: None
) -> None:
    create_app(api_client, namespace, replicas=1, partitions=4)
    with pytest.raises(ApiException) as refused:
        patch_app(api_client, namespace, {"spec": {"partitions": 5}})
    assert refused.value.status == 422 and "immutable" in refused.value.body


def test_evicted_member_pod_is_replaced_and_keeps_its_tasks(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    """Node-pressure eviction leaves the pod object behind, Failed; the member must come back."""
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=6)
    core = client.CoreV1Api(api_client)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 2, 6), 90, "a balanced app")
        before = owners(fleet)
        old_uid = core.read_namespaced_pod(f"{APP}-1", namespace).metadata.uid
        core.patch_namespaced_pod_status(
            f"{APP}-1",
            namespace,
            {
                "status": {
                    "phase": "Failed",
                    "reason": "Evicted",
                    "message": "The node was low on resource: memory.",
                    "conditions": [{"type": "Ready", "status": "False"}],
                }
            },
        )

        wait_for(
            lambda: replaced(api_client, namespace, old_uid) and balanced(api_client, namespace, fleet, 2, 6),
            90,
            "the evicted pod replaced and its member back",
        )
        assert owners(fleet) == before
        assert_clean(fleet)
