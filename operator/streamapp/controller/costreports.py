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
"""

from __future__ import annotations

import dataclasses
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
    for body in members:
        member_id, status = (body.get("spec") or {}).get("memberId"), body.get("status") or {}
        pod = pods.get(int(member_id)) if member_id is not None else None
        if pod is None or status.get("podUID") != pod.uid:
            continue
        found = samples(status)
        seconds = restart_seconds(found)
        if seconds is not None:
            restart[pod.member] = seconds
        handoffs.extend(found)
    return Costs(restart, handoff_seconds(handoffs), claims, pod_start_seconds(pods.values()))


def remembered(status: StreamAppStatus, claims: bool) -> Costs:
    """The costs the app's status keeps from earlier reports."""
    restart = {row.id: row.restart_seconds for row in status.members if row.restart_seconds is not None}
    return Costs(restart, status.handoff_seconds, claims)


def known(
    status: StreamAppStatus, members: Iterable[Body], pods: Mapping[int, PodState], claims: bool
) -> Costs:
    """What is known now: the costs `status` keeps, each replaced by a newly measured one where there
    is one."""
    return merged(remembered(status, claims), measured(members, pods, claims))


def with_costs(status: StreamAppStatus, costs: Costs) -> StreamAppStatus:
    """`status` with each member row's `restartSeconds` where known and `handoffSeconds` (unset, which
    the step's patch turns into a removal, while unknown)."""
    rows = tuple(
        dataclasses.replace(row, restart_seconds=costs.restart[row.id]) if row.id in costs.restart else row
        for row in status.members
    )
    return dataclasses.replace(status, members=rows, handoff_seconds=costs.handoff)


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
