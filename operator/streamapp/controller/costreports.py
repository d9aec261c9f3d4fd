"""What a restart and a handoff cost, from the executors' reports, kept in the app's status (pure).

An executor reports, per task, how long the task stood still when its ownership on that member began
and how it came there (`TaskReport.resumedAfter`, `resumedBy`). A member's restart cost is the slowest
of its tasks resumed by a restart; the app's handoff cost is the median over every member's tasks
resumed by a handoff (one slow move must not decide for the app). Only reports made by the member's
current pod count, as for lags: an earlier pod's report was read while that pod was current, so what
it measured is already kept.

A report goes with its task — a task that moves on takes its sample with it — so the last known values
are kept in the StreamApp status (`members[].restartSeconds`, `handoffSeconds`): a new value replaces
the old one, no value leaves it as it is. They change only when a restart or a handoff happened, never
with the reports in between, so keeping them costs no status write per report (docs/design.md).

So is the members' restore rate (`restoreRate`, the median of their `restoreRate` reports, which count
from any report like restore sizes): it goes with the member that measured it, and a scale-in deletes
that member. A member that has not measured its own is expected to restore at the app's
(`with_restore_rates`): the store and the network are the same, and without a rate the engine cannot
weigh waiting for a lost member against restoring its tasks elsewhere.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from streamapp.api.member import report_rows
from streamapp.api.streamapp import StreamAppStatus
from streamapp.controller.observe import PodState, pod_start_seconds
from streamapp.rebalance import MemberView
from streamapp.rebalance.costs import (
    Costs,
    Sample,
    expected_return,
    handoff_seconds,
    merged,
    restart_seconds,
)

Body = Mapping[str, Any]


def samples(status: Body) -> list[Sample]:
    """The resumptions a member's status reports."""
    return [
        Sample(str(t["resumedBy"]), float(t["resumedAfter"]))
        for t in report_rows(status)
        if t.get("resumedBy") is not None and t.get("resumedAfter") is not None
    ]


def measured(members: Iterable[Body], pods: Mapping[int, PodState], claims: bool) -> Costs:
    """The costs the members' current pods report now (`claims`: members keep state on a claim), and
    how long the pods took to become ready."""
    restart: dict[int, float] = {}
    handoffs: list[Sample] = []
    rates: list[float] = []
    for body in members:
        member_id, status = (body.get("spec") or {}).get("memberId"), body.get("status") or {}
        if (rate := _rate(status.get("restoreRate"))) is not None:
            rates.append(rate)
        pod = pods.get(int(member_id)) if member_id is not None else None
        if pod is None or status.get("podUID") != pod.uid:
            continue
        found = samples(status)
        seconds = restart_seconds(found)
        if seconds is not None:
            restart[pod.member] = seconds
        handoffs.extend(found)
    # Three significant figures: an estimate needs no more, and a status that changed with every report
    # of a restore under way would be written at every reconcile.
    rate = float(f"{statistics.median(rates):.3g}") if rates else None
    return Costs(restart, handoff_seconds(handoffs), claims, pod_start_seconds(pods.values()), rate)


def _rate(value: object) -> float | None:
    """A reported restore rate; one that is not a positive number reads as unmeasured."""
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None
    )


def remembered(status: StreamAppStatus, claims: bool) -> Costs:
    """The costs the app's status keeps from earlier reports."""
    restart = {row.id: row.restart_seconds for row in status.members if row.restart_seconds is not None}
    return Costs(restart, status.handoff_seconds, claims, restore_rate=status.restore_rate)


def known(
    status: StreamAppStatus, members: Iterable[Body], pods: Mapping[int, PodState], claims: bool
) -> Costs:
    """What is known now: the costs `status` keeps, each replaced by a newly measured one where there
    is one."""
    return merged(remembered(status, claims), measured(members, pods, claims))


def with_costs(status: StreamAppStatus, costs: Costs) -> StreamAppStatus:
    """`status` with each member row's `restartSeconds` where known, `handoffSeconds` and `restoreRate`
    (unset, which the step's patch turns into a removal, while unknown)."""
    rows = tuple(
        dataclasses.replace(row, restart_seconds=costs.restart[row.id]) if row.id in costs.restart else row
        for row in status.members
    )
    return dataclasses.replace(
        status, members=rows, handoff_seconds=costs.handoff, restore_rate=costs.restore_rate
    )


def with_return_estimates(views: Iterable[MemberView], costs: Costs) -> list[MemberView]:
    """Each member that is not alive, with how long after its loss it is expected to process again
    (`MemberView.return_seconds`, by `rebalance.costs.expected_return`: its measured restart, the
    app's, or the app's pod start)."""
    return [
        v
        if v.alive
        else dataclasses.replace(v, return_seconds=expected_return(v.id, costs.restart, costs.pod_start))
        for v in views
    ]


def with_restore_rates(views: Iterable[MemberView], costs: Costs) -> list[MemberView]:
    """Each member that has not measured its restore rate, with the app's (`costs.restore_rate`): what
    a member restores at when its own measure is missing — a new member, or all of them after the
    ones that measured were scaled in."""
    return [
        dataclasses.replace(v, restore_rate=costs.restore_rate) if v.restore_rate is None else v
        for v in views
    ]
