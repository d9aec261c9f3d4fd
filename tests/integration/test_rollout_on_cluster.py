"""A changed image rolls the member pods one at a time, each only after handing its tasks off.

Written against the operator milestone's harness (a real `streamapp operator` process, member pods on
kwok nodes, executors played by the fleet); the fleet checks single ownership and that every revoked
task had a caught-up copy elsewhere.
"""

from __future__ import annotations

from fleet import Fleet
from kubernetes import client
from operator_support import APP, Operators, app, create_app, patch_app, reasons
from test_operator import assert_clean, balanced

from localcluster.waiting import wait_for
from streamapp.api.names import REVISION_LABEL


def member_pods(api: client.ApiClient, namespace: str) -> dict[str, client.V1Pod]:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace).items
    return {p.metadata.name: p for p in pods if p.metadata.deletion_timestamp is None}


def test_a_new_image_rolls_every_member_after_a_warm_handoff(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    operators.start()
    create_app(api_client, namespace, replicas=3, partitions=12)
    with Fleet(api_client, namespace, APP, restore_rate=5_000) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 3, 12), 90, "a balanced app")
        before = {name: pod.metadata.uid for name, pod in member_pods(api_client, namespace).items()}
        old_revision = app(api_client, namespace)["status"]["updateRevision"]
        patch_app(api_client, namespace, {"spec": {"executor": {"image": "streamapp/executor:next"}}})
        seen_rolling = []

        def rolled() -> bool:
            status = app(api_client, namespace).get("status") or {}
            conditions = {c["type"]: c for c in status.get("conditions") or []}
            progressing = conditions.get("Progressing", {})
            seen_rolling.append(progressing.get("reason") == "RollingUpdate")
            pods = member_pods(api_client, namespace)
            replaced = all(pods.get(name) and pods[name].metadata.uid != uid for name, uid in before.items())
            return (
                replaced
                and status.get("updatedReplicas") == 3
                and status.get("currentRevision") == status.get("updateRevision") != old_revision
                and progressing.get("reason") == "RolloutComplete"
                and balanced(api_client, namespace, fleet, 3, 12)
            )

        wait_for(rolled, 300, "every member pod replaced from the new image, the app balanced")
        assert any(seen_rolling), "the rollout was never shown as Progressing=RollingUpdate"
        revision = app(api_client, namespace)["status"]["updateRevision"]
        assert {p.metadata.labels[REVISION_LABEL] for p in member_pods(api_client, namespace).values()} == {
            revision
        }
        # No member was lost holding tasks: each pod went only once it owned none.
        assert "MemberLost" not in reasons(api_client, namespace)
        assert "RevocationTimedOut" not in reasons(api_client, namespace)
        assert_clean(fleet)


def test_a_paused_rollout_replaces_nothing(
    api_client: client.ApiClient, namespace: str, operators: Operators
) -> None:
    operators.start()
    create_app(api_client, namespace, replicas=2, partitions=4)
    with Fleet(api_client, namespace, APP) as fleet:
        wait_for(lambda: balanced(api_client, namespace, fleet, 2, 4), 90, "a balanced app")
        before = {name: pod.metadata.uid for name, pod in member_pods(api_client, namespace).items()}
        patch = {
            "spec": {"rollingUpdate": {"paused": True}, "executor": {"image": "streamapp/executor:next"}}
        }
        patch_app(api_client, namespace, patch)

        def paused() -> bool:
            conditions = {
                c["type"]: c for c in (app(api_client, namespace).get("status") or {}).get("conditions") or []
            }
            return conditions.get("Progressing", {}).get("reason") == "RolloutPaused"

        wait_for(paused, 60, "Progressing=False/RolloutPaused")
        after = {name: pod.metadata.uid for name, pod in member_pods(api_client, namespace).items()}
        assert after == before
        assert app(api_client, namespace)["status"]["updatedReplicas"] == 0
        assert_clean(fleet)
