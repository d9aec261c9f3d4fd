"""The operator uses, keeps or deletes a child only when it carries the app's controller reference: a
name taken by anyone else is a NameConflict, never adopted (a ServiceAccount bound to `edit` run as an
executor, someone's claim mounted read-write) nor deleted (controller/kube.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from streamapp.controller.kube import Kube, NameConflict, _other_object

APP_UID = "app-uid"


def owned_by(uid: str | None) -> dict[str, Any]:
    refs = [] if uid is None else [{"kind": "StreamApp", "name": "web", "uid": uid, "controller": True}]
    return {"metadata": {"name": "web-0", "uid": "obj-uid", "ownerReferences": refs}}


class FakeCore:
    """CoreV1Api for one object of each kind: a create that meets `existing`, reads that return it."""

    def __init__(self, existing: dict[str, Any] | None) -> None:
        self.existing = existing
        self.api_client = client.ApiClient()
        self.deleted: list[tuple[str, Any]] = []

    def _create(self, namespace: str, body: Any) -> None:
        if self.existing is not None:
            raise ApiException(status=409, reason="AlreadyExists")

    def _read(self, name: str, namespace: str) -> dict[str, Any]:
        if self.existing is None:
            raise ApiException(status=404, reason="NotFound")
        return self.existing

    def __getattr__(self, name: str) -> Any:
        if name.startswith("create_namespaced_"):
            return self._create
        if name.startswith("read_namespaced_"):
            return self._read
        raise AttributeError(name)

    def delete_namespaced_persistent_volume_claim(self, name: str, namespace: str, body: Any = None) -> None:
        self.deleted.append((name, body))


def kube_with(existing: dict[str, Any] | None) -> tuple[Kube, FakeCore]:
    kube = Kube(client.ApiClient())
    fake = FakeCore(existing)
    kube.core = fake  # type: ignore[assignment]
    return kube, fake


def child(kind: str) -> dict[str, Any]:
    return {"kind": kind, **owned_by(APP_UID)}


@pytest.mark.parametrize("kind", ["ServiceAccount", "PersistentVolumeClaim", "Pod"])
def test_a_name_taken_by_anything_not_the_apps_is_a_conflict_naming_it(kind: str) -> None:
    for holder, said in (
        (owned_by(None), "no controller"),
        (owned_by("other"), "controlled by StreamApp web"),
    ):
        kube, _ = kube_with(holder)
        with pytest.raises(NameConflict) as raised:
            kube.create("ns", child(kind))
        assert f"{kind} ns/web-0 already exists and is not this app's ({said})" in str(raised.value)


def test_the_apps_own_existing_child_is_left_as_it_is() -> None:
    kube, _ = kube_with(owned_by(APP_UID))
    kube.create("ns", child("ServiceAccount"))  # created by an earlier reconcile: no error


def test_a_claim_that_is_not_the_apps_is_never_deleted() -> None:
    kube, fake = kube_with(owned_by("someone-else"))
    kube.delete_claim("ns", "web-state-0", APP_UID)
    assert fake.deleted == []
    kube, fake = kube_with(owned_by(APP_UID))
    kube.delete_claim("ns", "web-state-0", APP_UID)
    [(name, options)] = fake.deleted
    assert name == "web-state-0" and options.preconditions.uid == "obj-uid"
    kube, fake = kube_with(None)
    kube.delete_claim("ns", "web-state-0", APP_UID)  # already gone: fine
    assert fake.deleted == []


def _refusal(status: int, body: dict[str, Any]) -> ApiException:
    error = ApiException(status=status)
    error.body = json.dumps(body)
    return error


def test_only_a_uid_refusal_reads_as_another_object_and_other_conflicts_propagate() -> None:
    """A write conditional on a UID that meets another object is left alone; a conflict of any other
    kind must propagate, or a streak of them would never be shown (controller/conflicts.py)."""
    precondition = _refusal(
        409,
        {
            "reason": "Conflict",
            "message": 'Operation cannot be fulfilled on Pod "web-0": the UID in the precondition (a) '
            "does not match the UID in record (b). The object might have been deleted and then recreated",
        },
    )
    immutable = _refusal(
        422, {"reason": "Invalid", "details": {"causes": [{"field": "metadata.uid", "message": "immutable"}]}}
    )
    modified = _refusal(409, {"reason": "Conflict", "message": "the object has been modified"})
    other_field = _refusal(422, {"reason": "Invalid", "details": {"causes": [{"field": "spec.replicas"}]}})
    assert _other_object(precondition) and _other_object(immutable)
    assert not _other_object(modified) and not _other_object(other_field)
