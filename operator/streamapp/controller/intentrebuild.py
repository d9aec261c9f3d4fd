"""Rebuilding the intent from the members when `status.intent` cannot be read (functional core).

The intent is the operator's memory of an in-flight handoff. If it is damaged (edited by hand,
restored from a broken backup, written by an incompatible version), refusing to plan would stall the
app for good. The members' specs hold the last target each member was given — who is active with
which epoch, who is revoking, who warms or stands by — so the assignment they describe is a safe
place to resume from: it asks no member to do anything it was not already doing, and the engine
raises every epoch above what the store has seen before anything moves.

A *missing* intent is damage too when the members hold targets: the app's status was wiped (a backup
restored without status, a status replaced by hand) while its members went on. Planned from nothing,
the generation started again at 1, below what every executor had applied: executors ignore a target
whose generation is not above the one they applied, and an acknowledgement is the generation applied,
so every revocation counted as acknowledged at once while the old owners kept processing. Whatever the
intent says, the generation the engine plans from is floored at the highest one any member's spec
carries (`floor_generation`), so the next target is always news to every executor. (An executor's
acknowledgement is believed only up to its own target, `controller.acknowledgement`: a member's status
cannot lift the floor.)
An intent *older* than a target a member holds is damage for the same reason (`outdated`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from streamapp.api.member import StreamAppMemberSpec
from streamapp.controller.intent import decode
from streamapp.rebalance import Assignment
from streamapp.rebalance.model import TaskAssignment

Body = Mapping[str, Any]


def read_intent(data: Mapping[str, Any] | None, partitions: int) -> Assignment:
    """The persisted intent (`status.intent`); raises ValueError when it is unreadable or does not fit
    the app (an app never planned has none: the empty assignment)."""
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
    """The assignment the members' specs describe (tasks no member holds are unassigned), each read
    with the model its executor reads it with (`api.member`: lists or packed alike); raises
    ValidationError for a spec that does not parse."""
    tasks = [TaskAssignment() for _ in range(partitions)]
    generation = 0
    specs = [StreamAppMemberSpec.from_dict(body.get("spec") or {}, served=True) for body in members]
    for spec in sorted(specs, key=lambda s: s.member_id):
        member, since = spec.member_id, spec.generation
        generation = max(generation, since)
        owned = [(t.task, t.epoch, False) for t in spec.active] + [
            (t.task, t.epoch, True) for t in spec.revoking
        ]
        for task, epoch, revoking in owned:
            if 0 <= task < partitions and tasks[task].active is None:
                tasks[task] = replace(
                    tasks[task], active=member, epoch=epoch, revoking_since=since if revoking else None
                )
        for task in _tasks(spec.standby, partitions):
            tasks[task] = replace(tasks[task], standbys=(*tasks[task].standbys, member))
        for task in _tasks(spec.warmup, partitions):
            tasks[task] = replace(tasks[task], warmups=(*tasks[task].warmups, member))
    return Assignment(generation=generation, tasks=tuple(tasks))


def _tasks(listed: Iterable[int], partitions: int) -> list[int]:
    return [t for t in listed if 0 <= t < partitions]


def highest_generation(members: Iterable[Body]) -> int:
    """The highest generation any member's target carries. What its executor acknowledged is never
    believed above its own target (`acknowledgement.acked_generation`), so it adds nothing here: a
    member's status, which its executor writes, cannot lift the floor above what the operator wrote."""
    return max((int((body.get("spec") or {}).get("generation") or 0) for body in members), default=0)


def outdated(intent: Assignment, members: Iterable[Body]) -> str | None:
    """Why a readable intent is damage all the same, or None: it is missing while the members already
    hold targets, or older than a target a member holds. The operator writes the intent before any
    member target of its generation, so neither happens but by a status wiped or restored from an
    older backup. Planned from an older intent with its generation floored, the next targets would be
    news to the executors and hand owners back tasks at epochs the members have gone past (the store
    fences them, but they would try); rebuilt from the members, the plan resumes from what they hold."""
    members = list(members)
    highest = highest_generation(members)
    if not intent.tasks:
        if highest == 0:
            return None
        return f"status.intent is missing while the members hold targets up to generation {highest}"
    targets = max((int((b.get("spec") or {}).get("generation") or 0) for b in members), default=0)
    if intent.generation < targets:
        return (
            f"status.intent is at generation {intent.generation}, behind the members' targets at "
            f"generation {targets}"
        )
    return None


def floor_generation(intent: Assignment, members: Iterable[Body]) -> Assignment:
    """`intent` with its generation raised to the highest any member carries (see the module's
    docstring): the engine's next generation is then above what every executor applied."""
    highest = highest_generation(members)
    return intent if intent.generation >= highest else replace(intent, generation=highest)
