"""Scale of one app: object sizes, bytes written and plan() time at 1k, 10k and 100k tasks.

Pure measurement of the objects the operator renders (no API server): the StreamApp with its status,
the largest StreamAppMember (the spec the operator writes, the report its executor writes), the bytes
the operator sends per member report and over a whole scale-out by 10%, and the median time of a
plan() that changes nothing. Each figure is given for the encoding before issue 12 (intent format 1,
per-member lag in status.members, the whole status patched on any change) and after (format 2, no
per-member lag, only changed fields patched), from one run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from streamapp.api.member import StreamAppMemberStatus, TaskReport
from streamapp.api.names import REVISION_LABEL, member_labels, member_name
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children, supporting
from streamapp.controller.memo import Memo
from streamapp.controller.metrics import Metrics
from streamapp.controller.observe import Observed, PodState
from streamapp.controller.reconcile import reconcile
from streamapp.controller.status import app_status, digest, status_changes, step_patch
from streamapp.rebalance import AppConfig, Assignment, MemberView, Plan, member_targets, plan
from streamapp.rebalance.config import RebalanceConfig

SHAPES = ((1_000, 10), (10_000, 100), (100_000, 1_000))
NOW = "2026-01-01T00:00:00Z"
SPEC: dict[str, Any] = {
    "pipeline": {
        "transform": "streamapp.executor.samples.counts:counts",
        "source": {"type": "file", "path": "/data/in"},
        "stateStore": {"uri": "file:///data/state"},
    },
    "executor": {"image": "registry.example/streamapp:1.0", "resources": {"requests": {"cpu": "500m"}}},
}


def size(body: Any) -> int:
    """Bytes of `body` as JSON on the wire (compact, as the client sends it)."""
    return len(json.dumps(body, separators=(",", ":")))


def app_body(partitions: int, members: int, standbys: int, status: Mapping[str, Any]) -> dict[str, Any]:
    spec = {**SPEC, "partitions": partitions, "replicas": members, "rebalance": {"standbyReplicas": standbys}}
    meta = {"name": "counts", "namespace": "bench", "uid": "u", "generation": 1, "resourceVersion": "1"}
    return {
        "apiVersion": "streamapp.dev/v1alpha1",
        "kind": "StreamApp",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


def old_status(
    status: Mapping[str, Any], assignment: Assignment, views: Sequence[MemberView]
) -> dict[str, Any]:
    """The same status as written before issue 12: intent format 1, each member row with its lag."""
    lags = {v.id: sum(v.lags.values()) for v in views}
    rows = [{**row, "lag": lags.get(row["id"], 0)} for row in status["members"]]
    return {**status, "members": rows, "intent": assignment.to_dict()}


def reports(
    assignment: Assignment, views: Sequence[MemberView], input_lag: int, members: Iterable[int] | None = None
) -> list[dict[str, Any]]:
    """Every member's (or `members'`) report as its executor writes it: one TaskReport per copy,
    realistic values."""
    bodies = []
    targets = member_targets(assignment)
    for member in sorted(targets) if members is None else members:
        target = targets[member]
        copies = [(t, "active", e) for t, e in target.active.items()]
        copies += [(t, "standby", None) for t in target.standby] + [
            (t, "warmup", None) for t in target.warmup
        ]
        tasks = tuple(
            TaskReport(
                task=t,
                role=role,  # type: ignore[arg-type]
                epoch=epoch,
                applied_seq=123_456,
                applied_offset=98_765_432,
                lag=0 if role == "active" else 1_234,
                input_lag=input_lag if role == "active" else None,
                store_epoch=epoch or 1,
                restored_blocking=0,
                restored_background=54_321,
            )
            for t, role, epoch in copies
        )
        status = StreamAppMemberStatus(
            observed_generation=assignment.generation, pod_uid=f"uid-{member}", reported_at=NOW, tasks=tasks
        )
        spec = {"memberId": member, "generation": assignment.generation}
        bodies.append({"spec": spec, "status": status.merge_patch()["status"]})
    del views
    return bodies


class CountingKube:
    """Stands in for the API server: every write is counted in bytes and otherwise dropped (the
    app's status is merged, so the next reconcile sees what it wrote)."""

    app: dict[str, Any]

    def __init__(self) -> None:
        self.written = 0

    def patch_app_status(
        self, namespace: str, name: str, status: dict[str, Any], *rest: Any
    ) -> dict[str, Any]:
        self.written += size(status)
        self.app = {**self.app, "status": {**self.app["status"], **status}}
        return self.app

    def dry_run_pod(self, namespace: str, body: dict[str, Any]) -> None:
        """The member pod is admitted (a dry run stores nothing, so it counts no bytes)."""
        del namespace, body

    def __getattr__(self, name: str) -> Any:
        def write(*args: Any, **kwargs: Any) -> dict[str, Any]:
            self.written += sum(size(a) for a in args if isinstance(a, dict | list))
            return {}

        return write


def observed(app: Mapping[str, Any], bodies: Sequence[Mapping[str, Any]], assignment: Assignment) -> Observed:
    """The app with its pods (Ready, current revision), members (their targets and reports) and
    supporting children, as the operator's watches would show them once settled."""
    model = StreamApp.from_resource(app)
    owner = children.owner_reference(model)
    revision = children.pod_revision(model)
    members = int(app["spec"]["replicas"])
    targets = member_targets(assignment)
    reported = {int(b["spec"]["memberId"]): b["status"] for b in bodies}

    def meta(member: int) -> dict[str, Any]:
        return {
            "name": member_name("counts", member),
            "labels": member_labels("counts", member),
            "ownerReferences": [owner],
        }

    pods = [
        {
            "metadata": {
                **meta(m),
                "uid": f"uid-{m}",
                "labels": {**member_labels("counts", m), REVISION_LABEL: revision},
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for m in range(members)
    ]
    thresholds = model.spec.app_config().rebalance.lag_thresholds()
    specs = [
        {
            "metadata": {**meta(m), "resourceVersion": "1"},
            "spec": children.member_spec(
                "counts", m, targets.get(m), assignment.generation, False, thresholds
            ),
            "status": reported.get(m, {}),
        }
        for m in range(members)
    ]
    return Observed(
        app=app,
        pods=tuple(pods),
        members=tuple(specs),
        zones={},
        supporting=tuple(supporting.wanted(model, range(members))),
    )


def reconcile_costs(
    app: Mapping[str, Any], bodies: Sequence[Mapping[str, Any]], assignment: Assignment, runs: int
) -> tuple[float, float, int]:
    """Median CPU milliseconds of a whole reconcile of the settled app, every member reported:
    recomputing everything (a fresh memo each time: every report parsed, the plan computed, as before
    `controller/memo.py`), then with the app's memo after one member's report changed its tasks' input
    lag (what the operator pays per coalesced reconcile); and the bytes the latter writes."""
    seen = observed(app, bodies, assignment)
    kube, metrics, memo = CountingKube(), Metrics(), Memo()
    kube.app = dict(app)
    first = reconcile(kube, seen, 1.0, metrics, memo=memo)  # type: ignore[arg-type]
    seen = replace(seen, app=first.app or app)
    fresh, reused = [], []
    for _ in range(runs):
        started = time.process_time()
        reconcile(kube, seen, 1.0, metrics)  # type: ignore[arg-type]
        fresh.append((time.process_time() - started) * 1000)
    kube.written = 0
    for run in range(runs):
        again = reports(assignment, [], input_lag=20 + run, members=[0])[0]
        member = {**seen.members[0], "status": again["status"]}
        member["metadata"] = {**member["metadata"], "resourceVersion": f"r{run}"}
        seen = replace(seen, members=(member, *seen.members[1:]))
        started = time.process_time()
        outcome = reconcile(kube, seen, 1.0, metrics, memo=memo)  # type: ignore[arg-type]
        reused.append((time.process_time() - started) * 1000)
        seen = replace(seen, app=outcome.app or seen.app)
    return statistics.median(fresh), statistics.median(reused), kube.written // runs


@dataclass
class Row:
    """One shape's figures (bytes and milliseconds), before and after."""

    label: str
    app_old: int
    app_new: int
    member_spec: int
    member_report: int
    report_old: int
    report_new: int
    rebalance_steps: int
    rebalance_old: int
    rebalance_new: int
    plan_ms: float
    scale_plan_ms: float
    reconcile_ms: float
    reconcile_memo_ms: float
    reconcile_written: int


def pods_of(ids: Iterable[int]) -> dict[int, PodState]:
    return {m: PodState(m, f"counts-{m}", f"uid-{m}", True, False, None) for m in ids}


def settle(config: AppConfig, members: int) -> tuple[Plan, list[MemberView]]:
    views = [MemberView(m, acked_generation=1) for m in range(members)]
    first = plan(config, views, Assignment(), 0.0)
    views = [replace(v, acked_generation=first.assignment.generation) for v in views]
    return first, views


def member_writes(before: Assignment, after: Assignment, thresholds: tuple[int, ...]) -> int:
    """Bytes of the member spec patches the operator sends between two assignments (same_target skips)."""
    old, new = member_targets(before), member_targets(after)
    total = 0
    for member in set(old) | set(new):
        wanted = children.member_spec("counts", member, new.get(member), after.generation, False, thresholds)
        current = children.member_spec(
            "counts", member, old.get(member), before.generation, False, thresholds
        )
        if not children.same_target(current, wanted):
            total += size(wanted)
    return total


def scale_out(
    config: AppConfig, settled: Plan, views: list[MemberView], step_seconds: float, max_steps: int
) -> tuple[int, int, int, float]:
    """A scale-out by 10% run to the end, every warmup reporting caught up and every member acking at
    once: (steps, bytes written before, bytes written after, milliseconds of the first plan)."""
    grown = replace(config, replicas=config.replicas + config.replicas // 10)
    views = views + [MemberView(m, acked_generation=0) for m in range(config.replicas, grown.replicas)]
    pods = pods_of(range(grown.replicas))
    body = app_body(grown.partitions, grown.replicas, grown.rebalance.standby_replicas, {})
    previous = settled.assignment
    current_new = step_patch(app_status(StreamApp.from_resource(body), settled, previous, views, pods, NOW))
    current_old = old_status(current_new, previous, views)
    steps = written_old = written_new = 0
    first_ms = 0.0
    now = 1.0
    while steps < max_steps:
        started = time.process_time()
        result = plan(grown, views, previous, now)
        if steps == 0:
            first_ms = (time.process_time() - started) * 1000
        if not result.changed and not result.assignment.in_flight():
            break
        steps += 1
        stored = StreamApp.from_resource({**body, "status": current_new})
        status = step_patch(app_status(stored, result, previous, views, pods, NOW))
        old = old_status(status, result.assignment, views)
        written_new += size(status_changes(current_new, status))
        written_old += size(old) if status_changes(current_old, old) else 0
        member_bytes = member_writes(previous, result.assignment, grown.rebalance.lag_thresholds())
        written_new, written_old = written_new + member_bytes, written_old + member_bytes
        current_new, current_old, previous = status, old, result.assignment
        targets = member_targets(previous)
        views = [
            replace(
                v,
                acked_generation=previous.generation,
                lags={t: 0 for t in (*targets[v.id].warmup, *targets[v.id].standby)}
                if v.id in targets
                else {},
            )
            for v in views
        ]
        now += step_seconds
    return steps, written_old, written_new, first_ms


def measure(partitions: int, members: int, standbys: int, runs: int, max_steps: int) -> Row:
    config = AppConfig(partitions, members, RebalanceConfig(standby_replicas=standbys))
    settled, views = settle(config, members)
    assignment = settled.assignment
    pods = pods_of(range(members))
    bodies = reports(assignment, views, input_lag=10)
    empty = app_body(partitions, members, standbys, {})
    digests = [digest(b) for b in bodies]
    status = step_patch(
        app_status(StreamApp.from_resource(empty), settled, Assignment(), views, pods, NOW, digests)
    )
    old = old_status(status, assignment, views)
    specs = [
        children.member_spec("counts", m, t, assignment.generation, False, config.rebalance.lag_thresholds())
        for m, t in member_targets(assignment).items()
    ]
    # One member reports: its active tasks' input lag changes, its copies' lags change.
    reported = [bodies[0], *bodies[1:]]
    reported[0] = reports(assignment, views, input_lag=11)[0]
    after = step_patch(
        app_status(
            StreamApp.from_resource({**empty, "status": status}),
            settled,
            Assignment(),
            views,
            pods,
            NOW,
            [digest(b) for b in reported],
        )
    )
    lagging = [replace(views[0], lags={t: 7 for t in range(3)}), *views[1:]]
    times = []
    for _ in range(runs):
        started = time.process_time()
        plan(config, views, assignment, 1.0)
        times.append((time.process_time() - started) * 1000)
    steps, rebalance_old, rebalance_new, scale_ms = scale_out(config, settled, views, 5.0, max_steps)
    stored = app_body(partitions, members, standbys, status)
    reconcile_ms, reconcile_memo_ms, reconcile_written = reconcile_costs(stored, bodies, assignment, runs)
    return Row(
        label=f"{partitions:,} tasks, {members:,} members, standbyReplicas {standbys}",
        app_old=size(app_body(partitions, members, standbys, old)),
        app_new=size(app_body(partitions, members, standbys, status)),
        member_spec=max(size(s) for s in specs),
        member_report=max(size({"status": b["status"]}) for b in bodies),
        report_old=size(old_status(after, assignment, lagging)),
        report_new=size(status_changes(status, after)),
        rebalance_steps=steps,
        rebalance_old=rebalance_old,
        rebalance_new=rebalance_new,
        plan_ms=statistics.median(times),
        scale_plan_ms=scale_ms,
        reconcile_ms=reconcile_ms,
        reconcile_memo_ms=reconcile_memo_ms,
        reconcile_written=reconcile_written,
    )


def report(rows: Sequence[Row], runs: int, load: tuple[float, float]) -> str:
    def kb(n: int) -> str:
        return f"{n / 1000:,.1f}"

    lines = [
        "# Scale of one app: object sizes, bytes written, plan() time",
        "",
        f"Made by `make bench-scale` (`bench/scale.py`) on {dt.date.today()}: Python "
        f"{platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}; load average "
        f"{load[0]:.1f} at start, {load[1]:.1f} at end (the machine was shared with other work; times are "
        "CPU time of the process, `time.process_time()`, so they hold under load; bytes do not depend on it).",
        "",
        "Rendered objects as the operator writes them, in kB (1,000 bytes) of compact JSON; *before*: "
        "intent format 1, per-member `lag` in `status.members`, the whole status patched when anything "
        "changed; *after*: intent format 2 (`controller/intent.py`), no per-member lag, only changed "
        "fields patched. *App*: the whole StreamApp (spec and status; etcd refuses 1,572 kB). *Member "
        "spec*: the largest StreamAppMember spec the operator writes; *member report*: the largest "
        "status an executor writes (one entry per copy; the executor's format, unchanged). *Per report*: "
        "what the operator writes to the app after one member's report changes its tasks' input lag and "
        "its copies' lag. *Scale-out*: replicas +10% run to the end (every warmup caught up and every "
        "member acknowledging at once, steps of 5 s), all status and member spec patches summed. "
        f"*plan()*: median of {runs} plans of the settled app that change nothing; *first scale-out "
        "plan*: the first plan after the new members are ready; *reconcile*: median of the whole reconcile "
        "(observe, plan, status, member targets, children) of the settled app with every member reported, "
        "against an API server stand-in that counts the bytes of each write, *all recomputed* (every report "
        "parsed and the plan computed, as before `controller/memo.py`) and *after one report, memo* (one "
        "member's report changed its tasks' input lag; the app's memo reuses the other reports, the plan "
        "and the rendered member specs). With reports coalesced (one reconcile per "
        "`--min-reconcile-interval`, 1 s by default), the latter per second is the operator's share of a "
        "core for a settled app.",
        "",
        "| shape | app before | app after | member spec | member report | per report before (B) | per report "
        "after (B) | scale-out steps | scale-out before | scale-out after | plan() CPU ms | first scale-out plan CPU ms "
        "| reconcile, all recomputed CPU ms | reconcile after one report, memo CPU ms (B written) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.label} | {kb(r.app_old)} | {kb(r.app_new)} | {kb(r.member_spec)} | {kb(r.member_report)} "
            f"| {r.report_old:,} | {r.report_new:,} | {r.rebalance_steps} | {kb(r.rebalance_old)} "
            f"| {kb(r.rebalance_new)} | {r.plan_ms:,.0f} | {r.scale_plan_ms:,.0f} "
            f"| {r.reconcile_ms:,.0f} | {r.reconcile_memo_ms:,.0f} ({r.reconcile_written:,}) |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="write the Markdown report here (default: print it)")
    parser.add_argument("--runs", type=int, default=5, help="plans per median")
    parser.add_argument("--tasks", default="1000,10000,100000", help="comma-separated task counts to measure")
    parser.add_argument("--standbys", default="0,1", help="comma-separated standbyReplicas to measure")
    parser.add_argument("--max-steps", type=int, default=500, help="stop a scale-out after this many steps")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = []
    for partitions, members in SHAPES:
        if str(partitions) not in args.tasks.split(","):
            continue
        for standbys in map(int, args.standbys.split(",")):
            rows.append(measure(partitions, members, standbys, args.runs, args.max_steps))
            print(json.dumps(rows[-1].__dict__), flush=True)
    text = report(rows, args.runs, (load, os.getloadavg()[0]))
    if args.write:
        args.write.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
