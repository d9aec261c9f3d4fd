"""What one app's reconciles reuse from the previous one, so that a reconcile costs what changed.

A settled app of 100,000 tasks on 1,000 members whose executors report every 2 s changes almost
nothing between two reconciles: a report moves its tasks' input lag (an aggregate in the app's
status), not what the engine decides on. Recomputing everything cost seconds of CPU per reconcile
(bench/results/scale.md), most of it parsing reports that had not changed and planning from inputs
that had not changed. A `Memo` lives as long as its app's reconcile loop and keeps three things:

- **Member reports, parsed once per version** of their StreamAppMember (`metadata.resourceVersion`,
  which the API server changes on every write), and the digest the app's status reads of them: a
  reconcile reads only the members written since.
- **The last plan**, reused when the engine's inputs — the app's config, the member views and the
  persisted intent — equal those it was computed from, it left the intent exactly as it was, and its
  wake-up time has not come. The engine is deterministic, and a plan that changes nothing stays the engine's answer
  until the next deadline it reports (`tests/rebalance/test_invariants.py` checks both), so reusing it
  is the same as planning again.
- **What is rendered from an assignment**: its per-member split and its encoded intent (while it is
  the same object), and each member's spec (while its target and retiring mark are equal). The
  intent read back from the app is that assignment while it equals what was encoded from it.

Nothing here changes what a reconcile decides or writes: every reuse is guarded by equality of the
inputs it was computed from. The one exception is a measurement rather than a cache: the samples of
recent reports the autoscaler's rates come from (`controller.scaling.Rates`), which only a loop that
has watched the reports for a while has; a restarted operator decides nothing until it has them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamapp.api.member import StreamAppMemberStatus
from streamapp.controller import children, intent, intentrebuild
from streamapp.controller.observe import member_status
from streamapp.controller.scaling import Rates
from streamapp.controller.status import ReportDigest, digest
from streamapp.rebalance import AppConfig, Assignment, MemberTarget, MemberView, Plan, member_targets, plan

Body = Mapping[str, Any]
Planner = Callable[[AppConfig, Sequence[MemberView], Assignment, float], Plan]


@dataclass
class _Read:
    """One version of a member's object, as read: its report parsed, and its digest once asked for."""

    version: str
    status: StreamAppMemberStatus
    digest: ReportDigest | None = None


@dataclass(frozen=True)
class _Planned:
    """A plan with the inputs it was computed from."""

    config: AppConfig
    views: tuple[MemberView, ...]
    previous: Assignment
    now: float
    result: Plan
    fixpoint: bool


@dataclass
class Memo:
    """One app's reusable results (see the module docstring); `planner` is the engine's `plan`."""

    planner: Planner = plan
    reports: dict[str, _Read] = field(default_factory=dict)
    planned: _Planned | None = None
    targets: tuple[Assignment, dict[int, MemberTarget]] | None = None
    encoded: tuple[Assignment, dict[str, Any]] | None = None
    specs: dict[int, tuple[MemberTarget | None, bool, tuple[int, ...], dict[str, Any]]] = field(
        default_factory=dict
    )
    plans_reused: int = 0
    # What stopped the last reconcile from touching pods (reason, message), shown in the conditions
    blocked: tuple[str, str] | None = None
    # Members whose pod (or claim) the API server refused to create at the last try: they have no pod
    # and are not on their way back (`observe.member_views`)
    refused: frozenset[int] = frozenset()
    # The last revision whose member pod was put to the API server (dry run), and its refusal if any
    admitted: tuple[str, str | None] | None = None
    # The last revision whose template labels were checked against the namespace's Services, and why
    # it is refused if it is
    joins: tuple[str, str | None] | None = None
    # The autoscaler's samples of the members' reports (spec.autoscaling)
    rates: Rates = field(default_factory=Rates)

    def parse_reports(self, members: Iterable[Body]) -> Callable[[Body], StreamAppMemberStatus]:
        """Parse the reports of `members` that changed since the last call (forgetting members that
        are gone) and return the lookup `observe.member_views` reads them through."""
        kept: dict[str, _Read] = {}
        for body in members:
            meta = body.get("metadata") or {}
            name, version = meta.get("name"), meta.get("resourceVersion")
            if not name or not version:
                continue
            hit = self.reports.get(name)
            kept[name] = (
                hit if hit is not None and hit.version == version else _Read(version, member_status(body))
            )
        self.reports = kept
        return self.report

    def report(self, body: Body) -> StreamAppMemberStatus:
        """A member's report, parsed once per version of its object (after `parse_reports`)."""
        return self._read(body).status

    def digest(self, body: Body) -> ReportDigest:
        """`status.digest` of a member's object, computed once per version (after `parse_reports`)."""
        read = self._read(body)
        if read.digest is None:
            read.digest = digest(body)
        return read.digest

    def _read(self, body: Body) -> _Read:
        meta = body.get("metadata") or {}
        hit = self.reports.get(str(meta.get("name")))
        if hit is not None and hit.version == meta.get("resourceVersion"):
            return hit
        return _Read("", member_status(body))

    def plan(self, config: AppConfig, views: Sequence[MemberView], previous: Assignment, now: float) -> Plan:
        """The engine's plan, reused when it cannot differ from the last one."""
        last = self.planned
        if last is not None and _same_answer(last, config, views, previous, now):
            self.plans_reused += 1
            return last.result
        result = self.planner(config, views, previous, now)
        fixpoint = result.assignment is previous or result.assignment == previous
        self.planned = _Planned(config, tuple(views), previous, now, result, fixpoint)
        return result

    def member_targets(self, assignment: Assignment) -> dict[int, MemberTarget]:
        """`rebalance.member_targets` of `assignment`, split once per assignment."""
        if self.targets is None or self.targets[0] is not assignment:
            self.targets = (assignment, member_targets(assignment))
        return self.targets[1]

    def read_intent(self, stored: Mapping[str, Any] | None, partitions: int) -> Assignment:
        """`intentrebuild.read_intent`, without decoding the intent this loop wrote last.

        When the stored intent equals what `intent` gave for an assignment, decoding it gives that
        assignment back (the codec's round trip), so the assignment is returned itself. During a
        rebalance every step writes a new intent, and at 100,000 tasks decoding it again cost ~10%
        of the operator's CPU. An intent changed by anyone else is decoded (and checked) as always.
        """
        if self.encoded is not None and stored == self.encoded[1]:
            written = self.encoded[0]
            if len(written.tasks) in (0, partitions):
                return written
        return intentrebuild.read_intent(stored, partitions)

    def intent(self, assignment: Assignment) -> dict[str, Any]:
        """`status.intent` of `assignment` (`controller.intent.encode`), deflated once per assignment."""
        if self.encoded is None or self.encoded[0] is not assignment:
            self.encoded = (assignment, intent.encode(assignment))
        return dict(self.encoded[1])

    def member_spec(
        self,
        app: str,
        member: int,
        target: MemberTarget | None,
        generation: int,
        retiring: bool,
        lag_thresholds: tuple[int, ...],
    ) -> dict[str, Any]:
        """`children.member_spec`, rendered again only when the member's target, mark or the app's
        lag thresholds changed."""
        hit = self.specs.get(member)
        if hit is None or hit[:3] != (target, retiring, lag_thresholds):
            spec = children.member_spec(app, member, target, 0, retiring, lag_thresholds)
            hit = (target, retiring, lag_thresholds, spec)
            self.specs[member] = hit
        return {**hit[3], "generation": generation}


def _same_answer(
    last: _Planned, config: AppConfig, views: Sequence[MemberView], previous: Assignment, now: float
) -> bool:
    """Whether planning with these inputs at `now` must give `last.result`: the same inputs, a plan
    that left the assignment exactly as it was (not merely at the same generation: holding a lost
    member's tasks starts a deadline from `now` without a new generation), and `now` between the time
    it was made and its wake-up."""
    result = last.result
    if not last.fixpoint or now < last.now or (result.wake_at is not None and now >= result.wake_at):
        return False
    if last.config != config or len(last.views) != len(views):
        return False
    return (last.previous is previous or last.previous == previous) and all(
        a == b for a, b in zip(last.views, views, strict=True)
    )
