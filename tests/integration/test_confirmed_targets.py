"""A target read just before the operator took its tasks away is never run, on the real API server.

The race the chaos run lost once: an executor restarting in place read its member's target, the
operator (the member's pod not Ready yet) wrote the member a new target without those tasks and gave
them to another member, and the executor started them anyway. Here the executor's real membership
client is handed that older version of the object after the operator's conditional write, and the
operator's conditional write is tried against a version the executor has written past.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from recordingplane import RecordingPlane

from streamapp.api.member import StreamAppMemberSpec, TaskReport
from streamapp.api.names import GROUP, MEMBERS, VERSION, member_name
from streamapp.controller.kube import Kube
from streamapp.executor.membership import MembershipClient

APP = "confirm"


def target(generation: int, active: dict[int, int]) -> dict[str, Any]:
    return StreamAppMemberSpec.of(APP, 0, generation, active, {}, (), ()).to_dict()


def create_member(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "StreamAppMember",
        "metadata": {"name": member_name(APP, 0)},
        "spec": target(1, {0: 1, 1: 1}),
    }
    created: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, MEMBERS, body
    )
    return created


def read(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    found: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, MEMBERS, member_name(APP, 0)
    )
    return found


@pytest.mark.usefixtures("crds")
def test_a_target_the_operator_replaced_after_it_was_read_is_never_run(
    api_client: client.ApiClient, namespace: str
) -> None:
    stale = create_member(api_client, namespace)
    meta = stale["metadata"]
    Kube(api_client).patch_member_spec(
        namespace, meta["name"], target(2, {}), uid=meta["uid"], version=meta["resourceVersion"]
    )
    plane = RecordingPlane(echo=True)
    membership = MembershipClient(api_client, namespace, APP, 0, "pod-1", plane)

    membership.notice(stale)  # the version read before the operator's write, as a restarting executor may

    assert all(not t.active for t in plane.applied), "tasks taken up from a target that was replaced"
    assert membership.applied == 0
    membership.refresh()  # what the client's loop does next
    assert membership.applied == 2
    assert [t.generation for t in plane.applied][-1] == 2
    assert all(not t.active for t in plane.applied)
    assert read(api_client, namespace)["status"]["observedGeneration"] == 2


@pytest.mark.usefixtures("crds")
def test_a_current_target_is_confirmed_before_its_tasks_start_and_a_later_operator_write_waits_for_it(
    api_client: client.ApiClient, namespace: str
) -> None:
    created = create_member(api_client, namespace)
    plane = RecordingPlane(echo=True)
    membership = MembershipClient(api_client, namespace, APP, 0, "pod-1", plane)

    membership.notice(created)

    first, last = plane.applied[0], plane.applied[-1]
    assert not first.active, "the target's tasks started before it was confirmed"
    assert last.active_epochs() == {0: 1, 1: 1}
    stored = read(api_client, namespace)
    assert stored["status"]["observedGeneration"] == 1
    assert [TaskReport.from_dict(t).task for t in stored["status"]["tasks"]] == [0, 1]
    meta = created["metadata"]  # the version the operator planned on, before the confirmation
    with pytest.raises(ApiException) as refused:
        Kube(api_client).patch_member_spec(
            namespace, meta["name"], target(2, {}), uid=meta["uid"], version=meta["resourceVersion"]
        )
    assert refused.value.status == 409
    assert read(api_client, namespace)["spec"]["generation"] == 1
