"""The generated CRDs: CEL rules, subresources, printer columns, structural schema, CEL cost bounds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from streamapp.api.streamapp import StreamApp
from streamapp.rebalance.config import RebalanceConfig
from streamapp.render.crd import crds


def _by_kind() -> dict[str, dict[str, Any]]:
    return {doc["spec"]["names"]["kind"]: doc for doc in crds()}


def _version(kind: str) -> dict[str, Any]:
    versions: list[dict[str, Any]] = _by_kind()[kind]["spec"]["versions"]
    assert len(versions) == 1
    return versions[0]


def _root(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = _version(kind)["schema"]["openAPIV3Schema"]
    return schema


def _spec(kind: str) -> dict[str, Any]:
    spec: dict[str, Any] = _root(kind)["properties"]["spec"]
    return spec


def _rules(schema: dict[str, Any]) -> dict[str, str]:
    return {r["message"]: r["rule"] for r in schema.get("x-kubernetes-validations", [])}


def _walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for key, child in schema.get("properties", {}).items():
        yield from _walk(child, f"{path}.{key}")
    if "items" in schema:
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{}}")


def test_names_and_scope() -> None:
    app, member = _by_kind()["StreamApp"], _by_kind()["StreamAppMember"]
    assert app["metadata"]["name"] == "streamapps.streamapp.dev"
    assert app["spec"]["names"]["shortNames"] == ["sapp"]
    assert member["spec"]["names"]["shortNames"] == ["sam"]
    assert member["spec"]["names"]["plural"] == "streamappmembers"
    assert {doc["spec"]["scope"] for doc in crds()} == {"Namespaced"}
    assert {doc["spec"]["group"] for doc in crds()} == {"streamapp.dev"}
    assert all("all" not in doc["spec"]["names"]["categories"] for doc in crds())


def test_streamapp_cel_rules() -> None:
    spec = _spec("StreamApp")
    properties = spec["properties"]
    assert _rules(properties["partitions"])["partitions is immutable"] == "self == oldSelf"
    rebalance = properties["rebalance"]["properties"]
    # Single-field bounds are the schema's own keywords, which kubectl explain, kubeconform and
    # editors read; CEL is left to what a keyword cannot say.
    bounds = {
        "partitions": (properties["partitions"], 1),
        "replicas": (properties["replicas"], 0),
        "maxWarmupReplicas": (rebalance["maxWarmupReplicas"], 1),
        "maxWarmupReplicasTotal": (rebalance["maxWarmupReplicasTotal"], 0),
        "acceptableRecoveryLag": (rebalance["acceptableRecoveryLag"], 0),
    }
    for name, (schema, low) in bounds.items():
        assert schema["minimum"] == low, name
        assert not any(r["rule"].startswith("self >=") for r in schema.get("x-kubernetes-validations", [])), (
            name
        )
    assert rebalance["maxWarmupReplicasTotal"]["default"] == 0
    for key in ("scheduledRebalanceMaxDelay", "probingRebalanceInterval"):
        assert f"{key} must be a duration such as 30s, 5m or 1h30m" in _rules(rebalance[key])
    standby = spec["x-kubernetes-validations"][0]
    assert standby["message"] == "rebalance.standbyReplicas must be less than replicas"
    assert standby["fieldPath"] == ".rebalance.standbyReplicas"
    assert "self.replicas == 0" in standby["rule"]


def test_spec_defaults() -> None:
    properties = _spec("StreamApp")["properties"]
    assert properties["replicas"]["default"] == 3
    assert "default" not in properties["partitions"]
    assert _spec("StreamApp")["required"] == ["partitions", "pipeline", "executor"]
    assert properties["rebalance"]["default"] == {}
    defaults = {k: v["default"] for k, v in properties["rebalance"]["properties"].items()}
    assert defaults == RebalanceConfig().to_spec()
    executor = properties["executor"]["properties"]
    assert executor["command"]["default"] == ["streamapp", "executor", "--from-cluster"]
    assert executor["storage"]["default"] == {}
    assert executor["storage"]["properties"]["retainOnScaleIn"]["default"] is False


def test_permissive_where_the_executor_extends() -> None:
    executor = _spec("StreamApp")["properties"]["executor"]["properties"]
    template = executor["podTemplate"]["properties"]["spec"]
    assert template["x-kubernetes-preserve-unknown-fields"] is True
    assert template["properties"]["containers"]["items"]["x-kubernetes-preserve-unknown-fields"] is True
    assert executor["resources"]["x-kubernetes-preserve-unknown-fields"] is True
    assert executor["sparkConf"]["additionalProperties"] == {"type": "string"}
    pipeline = _spec("StreamApp")["properties"]["pipeline"]
    assert pipeline["properties"]["options"]["x-kubernetes-preserve-unknown-fields"] is True
    for key in ("source", "sink", "stateStore"):
        assert pipeline["properties"][key]["properties"]["options"]["x-kubernetes-preserve-unknown-fields"]
    status = _root("StreamApp")["properties"]["status"]["properties"]
    assert status["intent"]["x-kubernetes-preserve-unknown-fields"] is True


def test_status_shape() -> None:
    status = _root("StreamApp")["properties"]["status"]["properties"]
    assert set(status) >= {"observedGeneration", "conditions", "generation", "replicas", "readyReplicas"}
    assert set(status["tasks"]["properties"]) == {"active", "warming", "reserved", "unassigned", "revoking"}
    condition = status["conditions"]["items"]
    assert condition["required"] == ["type", "status", "reason", "message", "lastTransitionTime"]
    assert "enum" not in condition["properties"]["type"], "open: other tools' types are kept"
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["members"]["items"]["properties"]["phase"]["enum"] == [
        "Starting",
        "Ready",
        "Restarting",
        "Lost",
        "Draining",
    ]
    member_status = _root("StreamAppMember")["properties"]["status"]["properties"]
    assert set(member_status) == {
        "observedGeneration",
        "podUID",
        "startedAt",
        "reportedAt",
        "tasks",
        "localCopies",
        "setupError",
        "restoreRate",
        "processedRecords",
        "busySeconds",
        "batchRunningSince",
        "packed",
    }
    assert member_status["tasks"]["items"]["properties"]["role"]["enum"] == [
        "active",
        "revoking",
        "standby",
        "warmup",
    ]


def test_subresources() -> None:
    assert _version("StreamApp")["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    assert _version("StreamAppMember")["subresources"] == {"status": {}}


@pytest.mark.parametrize(
    ("kind", "columns"),
    [
        (
            "StreamApp",
            [
                "Replicas",
                "Ready",
                "Status",
                "Partitions",
                "Warming",
                "Unassigned",
                "Generation",
                "Input Lag",
                "Age",
            ],
        ),
        (
            "StreamAppMember",
            ["App", "Member", "Generation", "Observed", "Active", "Revoking", "Standby", "Warmup", "Age"],
        ),
    ],
)
def test_printer_columns(kind: str, columns: list[str]) -> None:
    printed = _version(kind)["additionalPrinterColumns"]
    assert [c["name"] for c in printed] == columns
    assert all("[*]" not in c["jsonPath"] for c in printed), (
        "the API server prints only a [*] path's first match"
    )


@pytest.mark.parametrize("kind", ["StreamApp", "StreamAppMember"])
def test_schema_is_structural(kind: str) -> None:
    for path, schema in _walk(_root(kind)):
        assert "type" in schema, f"{path} has no type"
        if schema["type"] == "object" and path not in (".metadata",):
            assert (
                "properties" in schema
                or "additionalProperties" in schema
                or schema.get("x-kubernetes-preserve-unknown-fields")
            ), f"{path} would prune everything"
        if path == ".metadata":
            assert schema == {"type": "object"}, "the API server allows nothing else on metadata"
        if path not in ("", ".metadata") and not path.endswith(("[]", "{}")):
            assert schema.get("description"), f"{path} has no description"


@pytest.mark.parametrize("kind", ["StreamApp", "StreamAppMember"])
def test_cel_cost_is_bounded(kind: str) -> None:
    """A CEL rule's estimated cost grows with string length and list size; bound both where rules run."""

    def bounded_lists(
        schema: dict[str, Any], path: str = "", inside_unbounded: bool = False
    ) -> Iterator[str]:
        if schema.get("x-kubernetes-validations") and inside_unbounded:
            yield path
        for key, child in schema.get("properties", {}).items():
            yield from bounded_lists(child, f"{path}.{key}", inside_unbounded)
        if "items" in schema:
            yield from bounded_lists(
                schema["items"], f"{path}[]", inside_unbounded or "maxItems" not in schema
            )

    assert list(bounded_lists(_root(kind))) == [], "CEL rules inside lists without maxItems"
    for path, schema in _walk(_root(kind)):
        # The root's rules read metadata.name, which the API server bounds itself (253 characters).
        for rule in (r["rule"] for r in schema.get("x-kubernetes-validations", []) if path):
            # `self.matches(` on a string, `self.<property>.matches(` from its object.
            for field in re.findall(r"self(?:\.(\w+))?\.matches\(", rule):
                target = schema["properties"][field] if field else schema
                assert "maxLength" in target, f"{path}.{field} runs a regex on an unbounded string"


def test_kind_constants_match_the_crd() -> None:
    names = _by_kind()["StreamApp"]["spec"]["names"]
    assert (names["plural"], names["singular"]) == (StreamApp.PLURAL, StreamApp.SINGULAR)
