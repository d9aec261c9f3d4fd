"""The supporting children are repaired on every pass: created when missing, put back when altered,
removed with the member they served."""

from __future__ import annotations

import copy

import pytest
from api_samples import app_model

from streamapp.api import ValidationError
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children, supporting
from streamapp.controller.permissions import executor_role_rules

APP = app_model(replicas=2)


def names(fixes: list[supporting.Repair]) -> list[tuple[str, str, str]]:
    return [(f.action, f.kind, f.name) for f in fixes]


def test_everything_missing_is_created_with_one_identity_per_member() -> None:
    fixes = supporting.repairs(supporting.wanted(APP, [0, 1]), [])
    assert names(fixes) == [
        ("create", "Service", "counts"),
        ("create", "PodDisruptionBudget", "counts"),
        ("create", "ServiceAccount", "counts-0"),
        ("create", "Role", "counts-0"),
        ("create", "RoleBinding", "counts-0"),
        ("create", "ServiceAccount", "counts-1"),
        ("create", "Role", "counts-1"),
        ("create", "RoleBinding", "counts-1"),
    ]
    role = next(f.body for f in fixes if f.kind == "Role" and f.name == "counts-1")
    assert all(rule["resourceNames"] == ["counts-1"] for rule in role["rules"])


def test_intact_children_need_nothing_and_a_deleted_one_comes_back() -> None:
    want = supporting.wanted(APP, [0, 1])
    observed = [copy.deepcopy(body) for body in want if body["kind"] != "PodDisruptionBudget"]
    for body in observed:  # what the API server adds does not count as drift
        body["metadata"]["uid"] = "x"
        body["metadata"].setdefault("annotations", {})["note"] = "kept"
    assert names(supporting.repairs(want, observed)) == [("create", "PodDisruptionBudget", "counts")]


def test_a_widened_role_is_narrowed_and_a_rebound_binding_replaced() -> None:
    want = supporting.wanted(APP, [0])
    observed = copy.deepcopy(want)
    role = next(b for b in observed if b["kind"] == "Role")
    role["rules"][0]["resourceNames"] = []  # every member
    binding = next(b for b in observed if b["kind"] == "RoleBinding")
    binding["subjects"] = [{"kind": "ServiceAccount", "name": "intruder"}]
    assert names(supporting.repairs(want, observed)) == [
        ("patch", "Role", "counts-0"),
        ("delete", "RoleBinding", "counts-0"),
    ]


def test_the_identity_of_a_removed_member_goes_and_app_wide_children_stay() -> None:
    observed = supporting.wanted(APP, [0, 1, 2])
    fixes = supporting.repairs(supporting.wanted(APP, [0, 1]), observed)
    assert names(fixes) == [
        ("delete", "Role", "counts-2"),
        ("delete", "RoleBinding", "counts-2"),
        ("delete", "ServiceAccount", "counts-2"),
    ]


def with_annotations(annotations: dict[str, str] | None) -> StreamApp:
    body = APP.to_dict()
    if annotations is not None:
        body["spec"]["executor"]["serviceAccountAnnotations"] = annotations
    return StreamApp.from_resource(body)


def account(fixes_or_want: list[dict[str, object]], name: str = "counts-0") -> dict[str, object]:
    return next(b for b in fixes_or_want if b["kind"] == "ServiceAccount" and b["metadata"]["name"] == name)  # type: ignore[index]


def test_workload_identity_annotations_follow_the_spec_and_leave_others_alone() -> None:
    irsa = {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/a"}
    want = supporting.wanted(with_annotations(irsa), [0])
    created = account(want)
    assert created["metadata"]["annotations"] == {  # type: ignore[index]
        **irsa,
        "streamapp.dev/managed-annotations": "eks.amazonaws.com/role-arn",
    }
    existing = copy.deepcopy(created)
    existing["metadata"]["annotations"]["someone/else"] = "kept"  # type: ignore[index]
    assert supporting.repairs([created], [existing]) == []

    changed = account(supporting.wanted(with_annotations({"iam.gke.io/gcp-service-account": "g@p"}), [0]))
    [fix] = supporting.repairs([changed], [existing])
    assert (fix.action, fix.kind) == ("patch", "ServiceAccount")
    assert fix.body == {
        "metadata": {
            "annotations": {
                "iam.gke.io/gcp-service-account": "g@p",
                "streamapp.dev/managed-annotations": "iam.gke.io/gcp-service-account",
                "eks.amazonaws.com/role-arn": None,
            }
        }
    }

    none = account(supporting.wanted(with_annotations(None), [0]))
    [fix] = supporting.repairs([none], [existing])
    assert fix.body == {
        "metadata": {
            "annotations": {"eks.amazonaws.com/role-arn": None, "streamapp.dev/managed-annotations": None}
        }
    }
    untouched = copy.deepcopy(none)
    untouched["metadata"]["annotations"] = {"someone/else": "kept"}
    assert supporting.repairs([none], [untouched]) == [], "an account of before this field: nothing to do"


def test_every_patch_and_delete_names_the_uid_of_the_object_observed() -> None:
    """The write applies to the object the watch showed, not to one re-created under its name."""
    want = supporting.wanted(APP, [0])
    observed = [*copy.deepcopy(want), *copy.deepcopy(supporting.wanted(APP, [1]))[2:]]
    for number, body in enumerate(observed):
        body["metadata"]["uid"] = f"uid-{number}"
    role = next(b for b in observed if b["kind"] == "Role" and b["metadata"]["name"] == "counts-0")
    role["rules"] = []
    budget = next(b for b in observed if b["kind"] == "PodDisruptionBudget")
    budget["spec"]["maxUnavailable"] = 3
    fixes = supporting.repairs(want, observed)
    by_object = {(b["kind"], b["metadata"]["name"]): b["metadata"]["uid"] for b in observed}
    assert {(f.action, f.kind, f.name) for f in fixes} == {
        ("patch", "Role", "counts-0"),
        ("patch", "PodDisruptionBudget", "counts"),
        ("delete", "ServiceAccount", "counts-1"),
        ("delete", "Role", "counts-1"),
        ("delete", "RoleBinding", "counts-1"),
    }
    assert all(f.uid == by_object[(f.kind, f.name)] for f in fixes)


SHARED = app_model(replicas=2, executor={"serviceAccountScope": "app"})


def observed_as(bodies: list[dict[str, object]]) -> list[dict[str, object]]:
    """`bodies` as the watch would show them once created (with a uid each)."""
    shown = copy.deepcopy(bodies)
    for body in shown:
        body["metadata"]["uid"] = f"uid-{body['kind']}-{body['metadata']['name']}"  # type: ignore[index]
    return shown


def test_a_shared_executor_account_is_one_identity_for_every_member_and_follows_the_scale() -> None:
    """`serviceAccountScope: app`: one ServiceAccount, Role and binding, `<app>-executors`, whose Role
    names every member the app has, and which every member pod runs as; a workload identity binding is
    then made once, for an account that exists before the app scales."""
    fixes = supporting.repairs(supporting.wanted(SHARED, [0, 1]), [])
    assert names(fixes)[2:] == [
        ("create", "ServiceAccount", "counts-executors"),
        ("create", "Role", "counts-executors"),
        ("create", "RoleBinding", "counts-executors"),
    ]
    role = next(f.body for f in fixes if f.kind == "Role")
    assert all(rule["resourceNames"] == ["counts-0", "counts-1"] for rule in role["rules"])
    assert {children.pod(SHARED, m)["spec"]["serviceAccountName"] for m in (0, 1)} == {"counts-executors"}

    scaled = supporting.repairs(
        supporting.wanted(SHARED, [0, 1, 2]), observed_as(supporting.wanted(SHARED, [0, 1]))
    )
    assert names(scaled) == [("patch", "Role", "counts-executors")]
    assert scaled[0].body["rules"][0]["resourceNames"] == ["counts-0", "counts-1", "counts-2"]


def test_an_app_without_members_has_no_shared_identity_and_no_role_reaches_every_member() -> None:
    """RBAC reads a rule without resourceNames as every name: a shared Role for no member would let
    the account read and report for every StreamAppMember of the namespace."""
    kinds = {body["kind"] for body in supporting.wanted(SHARED, [])}
    assert kinds == {"Service", "PodDisruptionBudget"}
    with pytest.raises(ValueError, match="at least one member"):
        executor_role_rules([])


def test_changing_the_account_scope_replaces_the_identities() -> None:
    per_member = observed_as(supporting.wanted(APP, [0, 1]))
    to_shared = names(supporting.repairs(supporting.wanted(SHARED, [0, 1]), per_member))
    assert [f for f in to_shared if f[0] == "create"] == [
        ("create", "ServiceAccount", "counts-executors"),
        ("create", "Role", "counts-executors"),
        ("create", "RoleBinding", "counts-executors"),
    ]
    assert sorted(f[1:] for f in to_shared if f[0] == "delete") == sorted(
        (kind, f"counts-{m}") for m in (0, 1) for kind in ("ServiceAccount", "Role", "RoleBinding")
    )
    back = names(
        supporting.repairs(supporting.wanted(APP, [0, 1]), observed_as(supporting.wanted(SHARED, [0, 1])))
    )
    assert sorted(f[1:] for f in back if f[0] == "delete") == [
        ("Role", "counts-executors"),
        ("RoleBinding", "counts-executors"),
        ("ServiceAccount", "counts-executors"),
    ]


def test_a_shared_account_is_refused_with_spark_on_the_cluster() -> None:
    """Each member's Spark driver creates pods as its member's own account (the admission policy on
    them names it): the two cannot be combined, and the message says so."""
    with pytest.raises(ValidationError, match="serviceAccountScope app is not allowed with sparkExecutors"):
        app_model(executor={"serviceAccountScope": "app", "sparkExecutors": {}})
