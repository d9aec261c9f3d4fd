"""The references policy as rendered (api/referencepolicy.py): it names every place a StreamApp can name
a Secret, ConfigMap or claim — those of the StreamApp's own schema and those of the Pod API the
template passes through — so a field added to either is not silently left unchecked. Its behaviour on
the API server is tests/integration/test_reference_policy.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from kubernetes import client

from streamapp.render import referencepolicy
from streamapp.render.crd import crd_files

T = "spec.executor.podTemplate.spec"
# Pod API fields that name a Secret (the client's models, camelCased as on the wire).
SECRET_FIELDS = ("secret_name", "secret_ref", "node_publish_secret_ref")


def fields() -> dict[str, str]:
    """Field named in each refusal → the kind it names."""
    return {field: kind.name for field, kind, _ in referencepolicy.references()}


def _schema_paths(schema: dict[str, Any], path: str) -> Iterator[str]:
    for key, sub in (schema.get("properties") or {}).items():
        yield f"{path}.{key}"
        yield from _schema_paths(sub, f"{path}.{key}")
    if "items" in schema:
        yield from _schema_paths(schema["items"], f"{path}[]")


def test_every_secret_the_streamapp_schema_names_is_checked() -> None:
    import yaml

    crd = yaml.safe_load(crd_files()["streamapp.dev_streamapps.yaml"])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    named = [
        p
        for p in _schema_paths(spec, "spec")
        if re.search(r"secret(Name)?$", p, re.IGNORECASE) and not p.startswith("spec.executor.podTemplate")
    ]
    assert named, "the schema names Secrets (S3 and Kafka credentials)"
    for path in named:
        assert fields().get(path) == "Secret", f"{path} is not checked"


def test_every_volume_source_that_names_a_secret_or_claim_is_checked() -> None:
    volume = client.V1Volume
    for attribute, type_name in volume.openapi_types.items():
        source = getattr(client, type_name, None)
        if source is None or not hasattr(source, "openapi_types"):
            continue
        wire = volume.attribute_map[attribute]
        for name in SECRET_FIELDS:
            if name in source.openapi_types:
                ref = source.attribute_map[name]
                field = f"{T}.volumes[].{wire}.{ref}" + ("" if name == "secret_name" else ".name")
                assert fields().get(field) == "Secret", f"{field} is not checked"
    assert fields()[f"{T}.volumes[].configMap.name"] == "ConfigMap"
    assert fields()[f"{T}.volumes[].persistentVolumeClaim.claimName"] == "PersistentVolumeClaim"
    projection = client.V1VolumeProjection.attribute_map
    assert {"secret", "configMap"} <= set(projection.values())
    assert fields()[f"{T}.volumes[].projected.sources[].secret.name"] == "Secret"
    assert fields()[f"{T}.volumes[].projected.sources[].configMap.name"] == "ConfigMap"


def test_every_container_list_and_pod_reference_is_checked() -> None:
    lists = {
        client.V1PodSpec.attribute_map[a]
        for a, t in client.V1PodSpec.openapi_types.items()
        if "Container" in t and t.startswith("List[")
    }
    assert lists == set(referencepolicy.CONTAINER_LISTS)
    containers = referencepolicy.policy()["spec"]["variables"][2]["expression"]
    assert all(f"variables.template.{key}" in containers for key in lists)
    assert fields()[f"{T}.imagePullSecrets[].name"] == "Secret"
    assert fields()[f"{T}.resourceClaims[].resourceClaimName"] == "ResourceClaim"


def test_each_refusal_names_its_field_and_kind_and_asks_the_authorizer() -> None:
    spec = referencepolicy.policy()["spec"]
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    for index, (field, kind, _) in enumerate(referencepolicy.references()):
        validation = spec["validations"][index]
        assert validation["expression"] == f"size(variables.denied{index}) == 0"
        assert validation["messageExpression"].startswith(f"'{field} names {kind.name} ' + ")
        assert "authorizer" not in validation["messageExpression"], "a message cannot call the authorizer"
        denied = variables[f"denied{index}"]
        assert f".resource('{kind.resource}').namespace(request.namespace)" in denied
        assert ".check('get').allowed()" in denied


def test_metadata_only_writes_are_not_checked() -> None:
    conditions = referencepolicy.policy()["spec"]["matchConditions"]
    assert [c["expression"] for c in conditions] == ["oldObject == null || object.spec != oldObject.spec"]
