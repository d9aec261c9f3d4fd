"""The few API calls a node makes, on plain JSON dicts (like a kubelet, it never needs typed models)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

Json = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"


def _json(response: Any) -> Json:
    data: Json = json.loads(response.data)
    return data


def is_not_found(error: ApiException) -> bool:
    return bool(error.status == 404)


class NodeClient:
    """API access with the node's own identity (``system:node:<name>``, limited by NodeRestriction)."""

    def __init__(self, kubeconfig: Path) -> None:
        api_client = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(api_client)
        self.server: str = api_client.configuration.host
        self.ca_file: str = api_client.configuration.ssl_ca_cert
        self.coordination = client.CoordinationV1Api(api_client)

    def pods_on(self, node: str) -> list[Json]:
        response = self.core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={node}", _preload_content=False
        )
        items: list[Json] = _json(response)["items"]
        return items

    def patch_pod_status(self, pod: Json, status: Json) -> None:
        meta = pod["metadata"]
        self.core.patch_namespaced_pod_status(
            meta["name"],
            meta["namespace"],
            {"status": status},
            _content_type=MERGE_PATCH,
            _preload_content=False,
        )

    def delete_pod_now(self, pod: Json) -> None:
        """Remove a pod whose processes are gone; the UID precondition spares a same-named successor."""
        meta = pod["metadata"]
        options = client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=meta["uid"])
        )
        try:
            self.core.delete_namespaced_pod(
                meta["name"], meta["namespace"], body=options, _preload_content=False
            )
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    def read_claim(self, namespace: str, name: str) -> Json | None:
        """A claim of a pod bound here (the Node authorizer allows exactly those); None if absent."""
        try:
            return _json(
                self.core.read_namespaced_persistent_volume_claim(name, namespace, _preload_content=False)
            )
        except ApiException as error:
            if is_not_found(error):
                return None
            raise

    def read_volume(self, name: str) -> Json | None:
        """The PV bound to a claim of a pod bound here; None if absent."""
        try:
            return _json(self.core.read_persistent_volume(name, _preload_content=False))
        except ApiException as error:
            if is_not_found(error):
                return None
            raise

    def read_config_map(self, namespace: str, name: str) -> Json:
        return _json(self.core.read_namespaced_config_map(name, namespace, _preload_content=False))

    def read_secret(self, namespace: str, name: str) -> Json:
        return _json(self.core.read_namespaced_secret(name, namespace, _preload_content=False))

    def request_token(self, namespace: str, account: str, pod_name: str, pod_uid: str, seconds: int) -> str:
        """A ServiceAccount token bound to the pod (invalid once the pod is gone)."""
        body = {
            "spec": {
                "audiences": [],
                "expirationSeconds": seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid},
            }
        }
        request = client.AuthenticationV1TokenRequest.model_validate(body)
        response = self.core.create_namespaced_service_account_token(
            account, namespace, request, _preload_content=False
        )
        token: str = _json(response)["status"]["token"]
        return token

    def read_node(self, name: str) -> Json | None:
        try:
            return _json(self.core.read_node(name, _preload_content=False))
        except ApiException as error:
            if is_not_found(error):
                return None
            raise

    def create_node(self, body: Json) -> None:
        self.core.create_node(client.V1Node.model_validate(body), _preload_content=False)

    def patch_node_status(self, name: str, status: Json) -> None:
        self.core.patch_node_status(
            name, {"status": status}, _content_type=MERGE_PATCH, _preload_content=False
        )

    def renew_lease(self, namespace: str, name: str, spec: Json, owner: Json | None) -> None:
        """Create the node's Lease, or move its renewTime forward."""
        try:
            self.coordination.patch_namespaced_lease(
                name, namespace, {"spec": spec}, _content_type=MERGE_PATCH, _preload_content=False
            )
        except ApiException as error:
            if not is_not_found(error):
                raise
            metadata: Json = {"name": name, "namespace": namespace}
            if owner is not None:
                metadata["ownerReferences"] = [owner]
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": metadata,
                "spec": spec,
            }
            lease = client.V1Lease.model_validate(body)
            self.coordination.create_namespaced_lease(namespace, lease, _preload_content=False)
