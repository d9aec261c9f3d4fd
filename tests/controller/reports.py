"""StreamAppMember bodies as executors would report them, for tests of the operator's status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from streamapp.controller.observe import PodState
from streamapp.controller.status import ReportDigest, digest
from streamapp.rebalance import Assignment, member_targets


def processing_members(assignment: Assignment, pods: Mapping[int, PodState]) -> list[dict[str, Any]]:
    """Every member's current pod has applied its target and reports its active tasks processed."""
    generation = assignment.generation
    return [
        {
            "spec": {"memberId": member, "generation": generation},
            "status": {
                "podUID": pods[member].uid,
                "observedGeneration": generation,
                "tasks": [
                    {"task": task, "role": "active", "epoch": epoch} for task, epoch in target.active.items()
                ],
            },
        }
        for member, target in member_targets(assignment).items()
        if member in pods
    ]


def digests(members: Iterable[Mapping[str, Any]]) -> list[ReportDigest]:
    """The members' reports as the app's status reads them (`status.digest`)."""
    return [digest(member) for member in members]
