"""Rebuilding the intent from the members when `status.intent` cannot be read (functional core).

The intent is the operator's memory of an in-flight handoff. If it is damaged (edited by hand,
restored from a broken backup, written by an incompatible version), refusing to plan would stall the
app for good. The members' specs hold the last target each member was given — who is active with
which epoch, who is revoking, who warms or stands by — so the assignment they describe is a safe
place to resume from: it asks no member to do anything it was not already doing, and the engine
raises every epoch above what the store has seen before anything moves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from streamapp.controller.intent import decode
from streamapp.rebalance import Assignment
from streamapp.rebalance.model import TaskAssignment

Body = Mapping[str, Any]


def read_intent(app: Body, partitions: int) -> Assignment:
    """The persisted intent; raises ValueError when it is unreadable or does not fit the app."""
    data = (app.get("status") or {}).get("intent")
    if not data:
        return Assignment()
    try:
        intent = decode(data)
    except (TypeError, KeyError, AttributeError, ValueError) as error:
        raise ValueError(f"status.intent is unreadable: {error}") from error
    if intent.tasks and len(intent.tasks) != partitions:
        raise ValueError(f"status.intent holds {len(intent.tasks)} tasks for {partitions} partitions")
    return intent


def intent_from_members(members: Iterable[Body], partitions: int) -> Assignment:
    """The assignment the members' specs describe (tasks no member holds are unassigned)."""
    tasks = [TaskAssignment() for _ in range(partitions)]
    generation = 0
    for body in sorted(members, key=lambda b: int((b.get("spec") or {}).get("memberId", 0))):
        spec = body.get("spec") or {}
        member, since = int(spec["memberId"]), int(spec.get("generation") or 0)
        generation = max(generation, since)
        for entry, revoking in [(e, False) for e in spec.get("active") or []] + [
            (e, True) for e in spec.get("revoking") or []
        ]:
            task, epoch = int(entry["task"]), int(entry["epoch"])
            if 0 <= task < partitions and tasks[task].active is None:
                tasks[task] = replace(
                    tasks[task], active=member, epoch=epoch, revoking_since=since if revoking else None
                )
        for task in _tasks(spec.get("standby"), partitions):
            tasks[task] = replace(tasks[task], standbys=(*tasks[task].standbys, member))
        for task in _tasks(spec.get("warmup"), partitions):
            tasks[task] = replace(tasks[task], warmups=(*tasks[task].warmups, member))
    return Assignment(generation=generation, tasks=tuple(tasks))


def _tasks(listed: Any, partitions: int) -> list[int]:
    return [int(t) for t in listed or [] if 0 <= int(t) < partitions]
