"""A step that takes a task from one member and gives it to another at the next epoch writes the
member giving it up first (controller/reconcile.py, `_write_member_specs`): written side by side, a
reader could find the new owner's target while the old one's still named the task active at the older
epoch — what the chaos observer caught after a lost member's tasks were restored elsewhere."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from test_controller_core import MODEL

from streamapp.controller import children
from streamapp.controller.reconcile import _write_member_specs
from streamapp.rebalance import Assignment, member_targets
from streamapp.rebalance.model import TaskAssignment


@dataclass
class RecordingKube:
    """Member spec patches in the order they were made; `refuse` fails the patch of that member."""

    patched: list[str] = field(default_factory=list)
    uids: dict[str, str] = field(default_factory=dict)
    refuse: str | None = None

    def patch_member_spec(self, namespace: str, name: str, spec: dict[str, Any], *, uid: str) -> None:
        if name == self.refuse:
            raise ApiException(status=500, reason="refused")
        self.patched.append(name)
        self.uids[name] = uid

    def create_member(self, namespace: str, body: dict[str, Any]) -> None:
        self.patched.append(body["metadata"]["name"])


def members_of(assignment: Assignment) -> list[dict[str, Any]]:
    """Every member's object as the previous step wrote it."""
    bodies = []
    for member, target in sorted(member_targets(assignment).items()):
        spec = children.member_spec("counts", member, target, assignment.generation, False, ())
        body = children.member_object(MODEL, member, spec)
        body["metadata"]["uid"] = f"uid-of-{body['metadata']['name']}"
        bodies.append(body)
    return bodies


BEFORE = Assignment(
    generation=4,
    tasks=(
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=1, epoch=1),
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=1, epoch=1),
    ),
)
# member 1 is lost: its task 1 is restored on member 0 at epoch 2, member 1 keeps a standby copy
AFTER = Assignment(
    generation=5,
    tasks=(
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=0, epoch=2, standbys=(1,)),
        TaskAssignment(active=0, epoch=1),
        TaskAssignment(active=1, epoch=1),
    ),
)


def test_the_member_giving_a_task_up_is_written_before_the_one_taking_it() -> None:
    for _ in range(20):  # the writes of one wave run on threads: order within it is not fixed
        kube = RecordingKube()
        plan = SimpleNamespace(assignment=AFTER)
        _write_member_specs(kube, MODEL, plan, members_of(BEFORE), frozenset())  # type: ignore[arg-type]
        assert kube.patched == ["counts-1", "counts-0"]


def test_when_giving_up_fails_the_new_epoch_is_not_written() -> None:
    kube = RecordingKube(refuse="counts-1")
    plan = SimpleNamespace(assignment=AFTER)
    with pytest.raises(ApiException):
        _write_member_specs(kube, MODEL, plan, members_of(BEFORE), frozenset())  # type: ignore[arg-type]
    assert kube.patched == []


def test_a_member_spec_is_patched_only_on_the_member_object_observed() -> None:
    """Each patch names the UID of the StreamAppMember the watch showed: one re-created under its
    name by someone else since is not written (kube.patch_member_spec's condition)."""
    kube = RecordingKube()
    _write_member_specs(kube, MODEL, SimpleNamespace(assignment=AFTER), members_of(BEFORE), frozenset())  # type: ignore[arg-type]
    assert kube.uids == {"counts-0": "uid-of-counts-0", "counts-1": "uid-of-counts-1"}


def test_a_giver_the_watch_shows_as_already_written_is_still_written_first() -> None:
    """The watch can lag behind the operator's own writes (a new leader's cache): it shows member 1
    without task 1 while its stored target still names it active at epoch 1. Judged from the plan's
    previous assignment, member 1 gives it up: written first, not skipped as unchanged."""
    lagging = [m for m in members_of(AFTER) if m["spec"]["memberId"] == 1] + [
        m for m in members_of(BEFORE) if m["spec"]["memberId"] == 0
    ]
    for _ in range(20):
        kube = RecordingKube()
        plan = SimpleNamespace(assignment=AFTER)
        _write_member_specs(kube, MODEL, plan, lagging, frozenset(), previous=BEFORE)  # type: ignore[arg-type]
        assert kube.patched == ["counts-1", "counts-0"]
