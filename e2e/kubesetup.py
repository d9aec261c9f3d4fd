"""Getting a cluster ready for StreamApps without the chart: the generated CRDs, and namespaces pods can
run in. Shared by the integration tests' fixtures and the benchmarks that run the operator as a process."""

from __future__ import annotations

from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from appbody import app_body
from localcluster.waiting import wait_for
from streamapp.render.crd import crd_manifests

READY_TIMEOUT_S = 60.0


def install_crds(api: client.ApiClient) -> None:
    """Create or replace every CRD generated from the resource models, and wait until each is
    Established (a custom object created before that is refused)."""
    extensions = client.ApiextensionsV1Api(api)
    for text in crd_manifests().values():
        body = yaml.safe_load(text)
        crd = body["metadata"]["name"]
        try:
            current = extensions.read_custom_resource_definition(crd)
            body["metadata"]["resourceVersion"] = current.metadata.resource_version
            extensions.replace_custom_resource_definition(crd, body)
        except ApiException as error:
            if error.status != 404:
                raise
            extensions.create_custom_resource_definition(body)

        wait_established(api, crd)


def wait_established(api: client.ApiClient, crd: str) -> None:
    """Wait until the CRD ``crd`` is Established: a custom object created before that is refused."""
    extensions = client.ApiextensionsV1Api(api)

    def established() -> bool:
        conditions = extensions.read_custom_resource_definition(crd).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    wait_for(established, READY_TIMEOUT_S, f"CRD {crd} Established")


def create_namespace(
    api: client.ApiClient, name: str, labels: dict[str, str], timeout_s: float = READY_TIMEOUT_S
) -> None:
    """Create `name` and wait for its `default` ServiceAccount, without which no pod is admitted."""
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name, "labels": labels}})

    def default_service_account() -> bool:
        return any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items)

    wait_for(default_service_account, timeout_s, f"ServiceAccount default in {name}")


def kwok_app(name: str, replicas: int, partitions: int, image: str, **rebalance: Any) -> dict[str, Any]:
    """A count app for members whose pods run on kwok nodes (nothing runs in them; reports are played or
    absent): the pipeline names paths no executor opens, so only the operator's side is exercised."""
    return app_body(
        name,
        namespace=None,
        uid=None,
        replicas=replicas,
        partitions=partitions,
        state_store="file:///var/lib/streamapp",
        executor={"image": image},
        rebalance=rebalance,
    )
