"""A watch answered 410 Gone while a member pod is deleted: the operator must still see it gone.

A fault proxy (faultproxy.py) stands between the operator and the real API server. It ends the
operator's pod watch and holds its reconnection; the test deletes a member pod meanwhile, then the
proxy answers the held watch with 410 Gone, so kopf lists the pods again. The deleted pod is in no
list and sends no DELETED event: unless the operator reconciles its indices with a fresh list
(controller/relist.py), it keeps the pod indexed for good and never re-creates the member.
"""

from __future__ import annotations

from faultproxy import FaultProxy
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from operator_support import APP

from localcluster.waiting import wait_for


def pod_uid(api: client.ApiClient, namespace: str, name: str) -> str | None:
    try:
        pod = client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return str(pod.metadata.uid)


def test_a_member_pod_deleted_while_the_watch_is_gone_is_recreated(
    api_client: client.ApiClient, namespace: str, app_behind_proxy: FaultProxy
) -> None:
    proxy = app_behind_proxy
    member = f"{APP}-1"
    wait_for(lambda: pod_uid(api_client, namespace, f"{APP}-0") is not None, 90, "member pod 0")
    wait_for(lambda: pod_uid(api_client, namespace, member) is not None, 90, "member pod 1")
    before = pod_uid(api_client, namespace, member)
    proxy.cut("pods")
    wait_for(lambda: proxy.held("pods") > 0, 60, "the operator's pod watch held by the proxy")
    client.CoreV1Api(api_client).delete_namespaced_pod(member, namespace, grace_period_seconds=0)
    wait_for(lambda: pod_uid(api_client, namespace, member) != before, 60, "the member pod deleted")
    proxy.gone("pods")
    wait_for(
        lambda: pod_uid(api_client, namespace, member) not in (None, before),
        90,
        "the member pod re-created after the relist",
    )
