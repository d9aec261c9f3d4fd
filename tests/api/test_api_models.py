"""The Python models: defaults, round trips, validation errors that name the field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from api_samples import MINIMAL_APP, app, app_with_pipeline, app_with_rebalance

from streamapp.api import (
    Condition,
    StreamApp,
    StreamAppMember,
    StreamAppMemberSpec,
    StreamAppSpec,
    StreamAppStatus,
    ValidationError,
    set_condition,
)
from streamapp.api.conditions import ConditionStatus
from streamapp.api.streamapp import BUILTIN_MERGES
from streamapp.rebalance.config import RebalanceConfig

ROOT = Path(__file__).resolve().parents[2]


def test_minimal_app_gets_every_default() -> None:
    spec = StreamApp.from_resource(MINIMAL_APP).spec
    assert spec.replicas == 3
    assert spec.rebalance == RebalanceConfig()
    assert spec.executor.command == ("streamapp", "executor", "--from-cluster")
    assert spec.executor.storage.retain_on_scale_in is False
    assert spec.pipeline.sink is None and spec.pipeline.merge is None


def test_round_trip_is_lossless_once_defaulted() -> None:
    body = copy.deepcopy(MINIMAL_APP)
    body["metadata"].update(uid="u-1", generation=4, finalizers=["x"], managedFields=[{"manager": "kubectl"}])
    body["spec"]["pipeline"]["source"]["options"] = {"fetch": 10}
    body["status"] = {
        "observedGeneration": 4,
        "generation": 7,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "AllTasksProcessed",
                "message": "12 tasks active",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 4,
            }
        ],
        "tasks": {"active": 12, "warming": 0, "reserved": 0, "unassigned": 0, "revoking": 0},
        "members": [{"id": 0, "pod": "counts-0", "phase": "Ready", "active": 4, "standby": 0, "warmup": 0}],
        "lastRebalance": {"time": "2026-01-01T00:00:00Z", "reason": "ScaleOut", "moved": 2},
        "intent": {"generation": 7, "tasks": [{"task": 0, "active": 0}]},
    }
    once = StreamApp.from_resource(body)
    wire = once.to_dict()
    assert StreamApp.from_resource(wire) == once
    assert wire["metadata"]["managedFields"] == [{"manager": "kubectl"}]
    assert wire["spec"]["pipeline"]["source"]["options"] == {"fetch": 10}
    assert wire["status"] == body["status"] | {"members": body["status"]["members"]}
    assert wire["spec"]["rebalance"] == RebalanceConfig().to_spec()


def test_empty_status_is_left_out() -> None:
    assert "status" not in StreamApp.from_resource(MINIMAL_APP).to_dict()


def test_kopf_like_body_without_envelope_is_accepted() -> None:
    body = {"metadata": MINIMAL_APP["metadata"], "spec": MINIMAL_APP["spec"], "status": {}}
    assert StreamApp.from_resource(body).metadata.name == "counts"


@pytest.mark.parametrize("name", ["streamapp.yaml", "kafka/streamapp-kafka.yaml"])
def test_sample_manifest_is_a_valid_app(name: str) -> None:
    sample = next(
        doc
        for doc in yaml.safe_load_all((ROOT / "manifests" / "samples" / name).read_text())
        if doc["kind"] == "StreamApp"
    )
    parsed = StreamApp.from_resource(sample, served=False)  # a file: a typo must be refused
    assert parsed.spec.pipeline.transform == "streamapp.executor.samples.counts:counts"
    assert parsed.spec.rebalance.standby_replicas == 1


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (app(partitions=0), "spec.partitions"),
        (app(replicas=-1), "spec.replicas"),
        (app(replicas="3"), "spec.replicas"),
        (app(replicas=True), "spec.replicas"),
        (app(replicaz=3), "spec"),
        (app(partitions=None), "spec.partitions"),
        (
            app_with_pipeline(transform="nocolon"),
            "spec.pipeline.transform",
        ),
        (
            app_with_pipeline(source={"type": "file"}),
            "spec.pipeline.source.path",
        ),
        (
            app_with_pipeline(source={"type": "ftp"}),
            "spec.pipeline.source.type",
        ),
        (
            app_with_pipeline(source={"type": "kafka", "path": "/x"}),
            "spec.pipeline.source.kafka",
        ),
        (
            app_with_pipeline(merge="avg"),
            "spec.pipeline.merge",
        ),
        (app(executor={}), "spec.executor.image"),
        (
            app(executor={"image": "i", "sparkConf": {"spark.master": 1}}),
            "spec.executor.sparkConf.spark.master",
        ),
        (
            app(executor={"image": "i", "storage": {"retainOnScaleIn": "yes"}}),
            "spec.executor.storage.retainOnScaleIn",
        ),
        (app_with_rebalance(maxWarmupReplicas=0), "spec.rebalance.maxWarmupReplicas"),
        (app_with_rebalance(maxWarmupReplicasTotal=-1), "spec.rebalance.maxWarmupReplicasTotal"),
        (app_with_rebalance(acceptableRecoveryLag=-1), "spec.rebalance.acceptableRecoveryLag"),
        (
            app_with_rebalance(scheduledRebalanceMaxDelay="5 minutes"),
            "spec.rebalance.scheduledRebalanceMaxDelay",
        ),
        (app_with_rebalance(scheduledRebalanceMaxDelay=300), "spec.rebalance.scheduledRebalanceMaxDelay"),
        (app_with_rebalance(probingRebalanceInterval="0s"), "spec.rebalance.probingRebalanceInterval"),
        (app_with_rebalance(protocol="sticky"), "spec.rebalance.protocol"),
        (app_with_rebalance(maxWarmupReplica=1), "spec.rebalance"),
        (app(replicas=2, rebalance={"standbyReplicas": 2}), "spec.rebalance.standbyReplicas"),
    ],
)
def test_invalid_spec_names_the_field(body: dict[str, Any], path: str) -> None:
    """Decoded as a file is (strictly: a typo is refused too)."""
    with pytest.raises(ValidationError) as raised:
        StreamApp.from_resource(body, served=False)
    assert raised.value.path == path
    assert str(raised.value).startswith(f"{path}: ")


def test_standbys_need_fewer_than_replicas_only_while_running() -> None:
    assert StreamApp.from_resource(app(replicas=0, rebalance={"standbyReplicas": 1})).spec.replicas == 0
    assert StreamApp.from_resource(app(replicas=2, rebalance={"standbyReplicas": 1})).spec.replicas == 2


def test_wrong_kind_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"^kind: "):
        StreamApp.from_resource({**MINIMAL_APP, "kind": "StreamAppMember"})


def test_app_config_is_what_the_engine_reads() -> None:
    spec = StreamAppSpec.from_dict(app(replicas=4, rebalance={"standbyReplicas": 1})["spec"])
    config = spec.app_config()
    assert (config.partitions, config.replicas, config.rebalance.standby_replicas) == (12, 4, 1)


def test_member_round_trip_and_wire_names() -> None:
    body = {
        "apiVersion": "streamapp.dev/v1alpha1",
        "kind": "StreamAppMember",
        "metadata": {"name": StreamAppMember.name_for("counts", 2), "namespace": "team"},
        "spec": {
            "app": "counts",
            "memberId": 2,
            "generation": 5,
            "active": [{"task": 1, "epoch": 3}],
            "revoking": [{"task": 4, "epoch": 2, "since": "2026-01-01T00:00:00Z"}, {"task": 5, "epoch": 1}],
            "standby": [7],
            "warmup": [8, 9],
            "retiring": False,
            "lagThresholds": [1000],
        },
        "status": {
            "observedGeneration": 5,
            "podUID": "pod-uid",
            "reportedAt": "2026-01-01T00:00:01Z",
            "tasks": [
                {"task": 1, "role": "active", "epoch": 3, "appliedSeq": 10, "appliedOffset": 99, "lag": 0}
            ],
            "localCopies": [{"task": 4, "appliedOffset": 70}],
        },
    }
    member = StreamAppMember.from_resource(body)
    assert member.metadata.name == "counts-2"
    assert member.status.pod_uid == "pod-uid"
    assert member.spec.revoking[1].since is None
    assert member.to_dict() == body


def test_member_report_with_unknown_role_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"^status\.tasks\[0\]\.role: "):
        StreamAppMember.from_resource(
            {
                "metadata": {"name": "m"},
                "spec": {"app": "a", "memberId": 0},
                "status": {"tasks": [{"task": 0, "role": "leader"}]},
            }
        )


@pytest.mark.parametrize(
    ("spec", "status", "path"),
    [
        ({"active": [{"task": 3, "epoch": 1}, {"task": 3, "epoch": 2}]}, {}, r"spec\.active\[1\]"),
        (
            {},
            {"tasks": [{"task": 0, "role": "warmup"}, {"task": 0, "role": "warmup"}]},
            r"status\.tasks\[1\]",
        ),
    ],
)
def test_a_task_listed_twice_is_refused(spec: dict[str, Any], status: dict[str, Any], path: str) -> None:
    """The task lists are atomic for the API server (one managedFields entry each), which then no longer
    refuses duplicate keys: the models do, on both sides. One task in two roles is no duplicate."""
    body = {"metadata": {"name": "m"}, "spec": {"app": "a", "memberId": 0, **spec}, "status": status}
    with pytest.raises(ValidationError, match=rf"^{path}: duplicate entry"):
        StreamAppMember.from_resource(body)
    two_roles = [{"task": 0, "role": "active"}, {"task": 0, "role": "revoking"}]
    StreamAppMember.from_resource(
        {**body, "spec": {"app": "a", "memberId": 0}, "status": {"tasks": two_roles}}
    )


def _condition(status: ConditionStatus, at: str, reason: str = "Stable") -> Condition:
    return Condition(type="Ready", status=status, reason=reason, message="", last_transition_time=at)


def test_set_condition_keeps_transition_time_while_status_holds() -> None:
    first = set_condition((), _condition("True", "t1"))
    same = set_condition(first, _condition("True", "t2", reason="StillFine"))
    flipped = set_condition(same, _condition("False", "t3"))
    assert [c.last_transition_time for c in (first[0], same[0], flipped[0])] == ["t1", "t1", "t3"]
    assert same[0].reason == "StillFine"
    assert StreamAppStatus(conditions=flipped).condition("Ready") == flipped[0]


def test_condition_reason_must_be_camel_case() -> None:
    with pytest.raises(ValidationError, match=r"^status\.conditions\[0\]\.reason: "):
        StreamAppStatus.from_dict(
            {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "all good",
                        "message": "",
                        "lastTransitionTime": "t",
                    }
                ]
            }
        )


def test_reads_a_kopf_body() -> None:
    body = kopf.Body(copy.deepcopy(MINIMAL_APP))
    assert StreamApp.from_resource(body).spec.partitions == 12


def test_owner_references_round_trip() -> None:
    owner = {"apiVersion": "streamapp.dev/v1alpha1", "kind": "StreamApp", "name": "counts", "uid": "u"}
    body = {
        "metadata": {"name": "counts-0", "ownerReferences": [owner]},
        "spec": {"app": "counts", "memberId": 0},
    }
    member = StreamAppMember.from_resource(body)
    assert member.metadata.owner_references == (owner,)
    assert member.to_dict()["metadata"]["ownerReferences"] == [owner]


def test_builtin_merges_are_the_executors() -> None:
    from streamapp.executor.merge import BUILTINS

    assert BUILTIN_MERGES == BUILTINS


def test_a_field_of_another_crd_version_is_left_out_of_a_served_body_and_refused_in_a_file() -> None:
    """A body read from the API server passed its schema, so a key unknown here is a field of a newer
    (or older) CRD: after an upgrade is rolled back, or while executors of the old image read a newer
    operator's targets. It is left out, not refused (which would make every app InvalidSpec and every
    member deaf). A file or a test decodes strictly: there a typo must not pass."""
    body = app(replicas=2, rebalance={"fasterThanLight": True})
    body["spec"]["someNewField"] = {"x": 1}
    body["status"] = {"someNewAggregate": 3}
    parsed = StreamApp.from_resource(body)
    assert parsed.spec.replicas == 2 and "someNewField" not in parsed.spec.to_dict()
    with pytest.raises(ValidationError, match="unknown field"):
        StreamAppSpec.from_dict(body["spec"])
    target = {"app": "counts", "memberId": 0, "generation": 3, "active": [], "futureHint": "x"}
    assert StreamAppMemberSpec.from_dict(target, served=True).generation == 3
    with pytest.raises(ValidationError, match="unknown field"):
        StreamAppMemberSpec.from_dict(target)
