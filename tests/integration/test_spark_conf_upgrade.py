"""An app stored before the CRD refused its sparkConf keys (`api.sparkconf`): after the upgrade the API
server still lets its author change the rest of it (CRD validation ratcheting keeps an unchanged
sparkConf), refuses a change of its sparkConf that keeps a refused key, naming the key, and the operator's
model refuses the stored app (it is flagged InvalidSpec, not run)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from api_samples import app
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubesetup import install_crds, wait_established
from localcluster.waiting import wait_for
from streamapp.api import GROUP, VERSION, StreamApp
from streamapp.api.fields import ValidationError
from streamapp.api.sparkconf import WIRED_CEL
from streamapp.render.crd import crd_files

TIMEOUT_S = 60.0
APPS = StreamApp.PLURAL
CRD = f"{APPS}.{GROUP}"
HOSTILE = "spark.kubernetes.executor.volumes.hostPath.root.options.path"


def _previous_crd() -> dict[str, Any]:
    """The StreamApp CRD as it was before the sparkConf rules."""
    (text,) = [t for name, t in crd_files().items() if APPS in name]
    body: dict[str, Any] = yaml.safe_load(text)
    (version,) = body["spec"]["versions"]
    executor = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["executor"]
    del executor["properties"]["sparkConf"]["x-kubernetes-validations"]
    executor["x-kubernetes-validations"] = [
        v for v in executor["x-kubernetes-validations"] if v["rule"] != WIRED_CEL
    ]
    return body


def _replace_crd(api: client.ApiClient, body: dict[str, Any]) -> None:
    extensions = client.ApiextensionsV1Api(api)
    body = copy.deepcopy(body)
    body["metadata"]["resourceVersion"] = extensions.read_custom_resource_definition(
        CRD
    ).metadata.resource_version
    extensions.replace_custom_resource_definition(CRD, body)
    wait_established(api, CRD)


def _hostile(name: str) -> dict[str, Any]:
    body = app(executor={"image": "img", "sparkConf": {HOSTILE: "/", "spark.ui.enabled": "false"}})
    body["metadata"]["name"] = name
    return body


@pytest.fixture
def previous_release(api_client: client.ApiClient, crds: None) -> Iterator[None]:
    """The CRD of the previous release in place; today's again afterwards, whatever happened."""
    _replace_crd(api_client, _previous_crd())
    try:
        yield
    finally:
        install_crds(api_client)


def test_a_stored_app_with_a_now_refused_key_stays_editable_and_is_flagged(
    api_client: client.ApiClient, namespace: str, previous_release: None
) -> None:
    objects = client.CustomObjectsApi(api_client)

    def stored() -> bool:  # the previous schema reaches the API server's handler a moment after the CRD
        try:
            objects.create_namespaced_custom_object(GROUP, VERSION, namespace, APPS, _hostile("old"))
        except ApiException as error:
            if error.status in (404, 422):
                return False
            raise
        return True

    wait_for(stored, TIMEOUT_S, "an app with the now-refused key stored under the previous CRD")
    install_crds(api_client)

    def refused_now() -> str | None:
        try:
            objects.create_namespaced_custom_object(
                GROUP, VERSION, namespace, APPS, _hostile("new"), dry_run="All"
            )
        except ApiException as error:
            if error.status == 422:
                return str(json.loads(error.body)["message"])
            raise
        return None

    message = wait_for(refused_now, TIMEOUT_S, "today's CRD to refuse the key")
    assert f"sparkConf key {HOSTILE} is not allowed" in message

    # Ratcheting: the unchanged sparkConf does not block a change elsewhere in the app...
    objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, APPS, "old", {"spec": {"replicas": 2}})
    # ...but a change of the sparkConf is checked whole, and said by key.
    with pytest.raises(ApiException) as changed:
        objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            namespace,
            APPS,
            "old",
            {"spec": {"executor": {"sparkConf": {"spark.sql.shuffle.partitions": "4"}}}},
        )
    assert changed.value.status == 422 and f"sparkConf key {HOSTILE} is not allowed" in changed.value.body

    current = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, APPS, "old")
    with pytest.raises(ValidationError) as flagged:
        StreamApp.from_resource(current)
    assert flagged.value.path == "spec.executor.sparkConf" and HOSTILE in flagged.value.problem
