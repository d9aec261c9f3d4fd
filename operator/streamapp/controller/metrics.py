"""Prometheus metrics of the operator (served on `--metrics-port`: `controller.endpoints`)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from streamapp.controller.status import task_counts
from streamapp.processmetrics import register_process_metrics
from streamapp.rebalance import Assignment, LostMember, MemberView
from streamapp.rebalance.autoscaler import ScaleDecision

_LABELS = ("namespace", "app")
# What KEDA's prometheus trigger and a metrics adapter query (manifests/samples/).
INPUT_LAG_METRIC = "streamapp_input_lag_records"
FENCED_TASKS_METRIC = "streamapp_fenced_tasks"


@dataclass
class Metrics:
    """The operator's instruments, on a registry of their own (tests create as many as they like)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        register_process_metrics(r)
        self.rebalances = Counter(
            "streamapp_rebalances_total", "Assignment generations produced", _LABELS, registry=r
        )
        self.task_movements = Counter(
            "streamapp_task_movements_total", "Active-owner changes between members", _LABELS, registry=r
        )
        self.tasks = Gauge(
            "streamapp_tasks",
            "Tasks by state: active (processed by a live member), revoking, reserved (held for a lost "
            "member: nobody processes them), unassigned",
            (*_LABELS, "state"),
            registry=r,
        )
        self.warmups = Gauge("streamapp_warmups", "Warmup copies catching up", _LABELS, registry=r)
        self.generation = Gauge("streamapp_generation", "Current assignment generation", _LABELS, registry=r)
        self.reconcile_seconds = Histogram(
            "streamapp_reconcile_seconds", "Duration of one reconcile", registry=r
        )
        self.plan_seconds = Histogram("streamapp_plan_seconds", "Duration of one engine plan", registry=r)
        self.leader = Gauge("streamapp_leader", "1 while this replica holds the leader lease", registry=r)
        self.fenced_tasks = Gauge(
            FENCED_TASKS_METRIC,
            "Tasks whose active owner is fenced by a higher epoch in the state store (being resolved)",
            _LABELS,
            registry=r,
        )
        self.lost_tasks = Gauge(
            "streamapp_lost_tasks",
            "Tasks held for lost members: waiting for their member, or restoring elsewhere (taken over "
            "or warming) because that is expected to be quicker",
            (*_LABELS, "choice"),
            registry=r,
        )
        self.lost_expected_back = Gauge(
            "streamapp_lost_member_expected_back_seconds",
            "When a lost member is expected to process again, in seconds after its loss (no sample: unknown)",
            (*_LABELS, "member"),
            registry=r,
        )
        self.lost_restore = Gauge(
            "streamapp_lost_member_restore_seconds",
            "Estimated restore of a lost member's slowest held task elsewhere (no sample: not measured)",
            (*_LABELS, "member"),
            registry=r,
        )
        self._lost_members: dict[tuple[str, ...], set[str]] = {}
        self.flapping_members = Gauge(
            "streamapp_flapping_members",
            "Members damped for flapping (lost twice within rebalance.flapWindow): given no tasks until "
            "they have stayed up for the window",
            _LABELS,
            registry=r,
        )
        self.autoscaler_replicas = Gauge(
            "streamapp_autoscaler_replicas",
            "The operator's autoscaler (spec.autoscaling): the replicas it wants (kind=desired) and the "
            "members the measured rates and lag call for (kind=needed)",
            (*_LABELS, "kind"),
            registry=r,
        )
        self.autoscaler_waiting = Gauge(
            "streamapp_autoscaler_waiting",
            "1 while the autoscaler's last decision is taking effect (new members' pods or warmups, removed "
            "members' handoffs): no new decision is taken meanwhile",
            _LABELS,
            registry=r,
        )
        self.autoscaler_decisions = Counter(
            "streamapp_autoscaler_decisions_total",
            "Replica changes the autoscaler made, by action (ScaleOut, ScaleIn)",
            (*_LABELS, "action"),
            registry=r,
        )
        self.input_lag = Gauge(
            INPUT_LAG_METRIC,
            "Source records not yet processed by the active owners (the app's status.inputLag)",
            _LABELS,
            registry=r,
        )

    def observe_assignment(
        self, labels: Mapping[str, str], assignment: Assignment, views: Sequence[MemberView]
    ) -> None:
        """Gauges that mirror the persisted assignment, by the states the app's status counts
        (`status.task_counts`): a task held for a lost member is `reserved`, not `active` (nobody
        processes it), so an alert can see it."""
        counts = task_counts(assignment, views)
        for state in ("active", "revoking", "reserved", "unassigned"):
            self.tasks.labels(**labels, state=state).set(getattr(counts, state))
        self.warmups.labels(**labels).set(sum(len(t.warmups) for t in assignment.tasks))
        self.generation.labels(**labels).set(assignment.generation)
        self.flapping_members.labels(**labels).set(sum(1 for f in assignment.flaps if f.damped))

    def observe_lost(self, labels: Mapping[str, str], lost: tuple[LostMember, ...]) -> None:
        """Mirror what the plan weighed for lost members; series of members no longer lost (or no
        longer measured) are removed, so a dashboard shows only what holds now."""
        key = tuple(labels[name] for name in _LABELS)
        waiting = sum(len(m.held) - len(m.restoring) for m in lost)
        self.lost_tasks.labels(**labels, choice="wait").set(waiting)
        self.lost_tasks.labels(**labels, choice="restore").set(sum(len(m.restoring) for m in lost))
        shown: set[str] = set()
        for member in lost:
            name = str(member.member)
            shown.add(name)
            for gauge, value in (
                (
                    self.lost_expected_back,
                    None if member.back_at is None else member.back_at - member.lost_at,
                ),
                (self.lost_restore, member.restore_seconds),
            ):
                if value is None:
                    with contextlib.suppress(KeyError):
                        gauge.remove(*key, name)
                else:
                    gauge.labels(**labels, member=name).set(value)
        for gone in self._lost_members.get(key, set()) - shown:
            for gauge in (self.lost_expected_back, self.lost_restore):
                with contextlib.suppress(KeyError):
                    gauge.remove(*key, gone)
        self._lost_members[key] = shown

    def forget(self, labels: Mapping[str, str]) -> None:
        """Remove every series of one app (it was deleted, or this replica stopped leading): a gauge
        left behind would show a deleted app's tasks and lag for as long as the operator runs."""
        wanted = tuple(labels[name] for name in _LABELS)
        for metric in (
            self.rebalances,
            self.task_movements,
            self.tasks,
            self.warmups,
            self.generation,
            self.fenced_tasks,
            self.input_lag,
            self.lost_tasks,
            self.lost_expected_back,
            self.lost_restore,
            self.flapping_members,
            self.autoscaler_replicas,
            self.autoscaler_waiting,
            self.autoscaler_decisions,
        ):
            names = metric._labelnames  # the public API lists no label sets
            found = {
                tuple(sample.labels[n] for n in names)
                for family in metric.collect()
                for sample in family.samples
                if all(n in sample.labels for n in names)
            }
            for values in found:
                if values[: len(wanted)] == wanted:
                    with contextlib.suppress(KeyError):
                        metric.remove(*values)
        self._lost_members.pop(wanted, None)

    def observe_autoscaler(self, labels: Mapping[str, str], decision: ScaleDecision | None) -> None:
        """Mirror the autoscaler's decision; an app that does not autoscale has no series."""
        key = tuple(labels[name] for name in _LABELS)
        if decision is None:
            for kind in ("desired", "needed"):
                with contextlib.suppress(KeyError):
                    self.autoscaler_replicas.remove(*key, kind)
            with contextlib.suppress(KeyError):
                self.autoscaler_waiting.remove(*key)
            return
        self.autoscaler_replicas.labels(**labels, kind="desired").set(decision.replicas)
        if decision.needed is None:
            with contextlib.suppress(KeyError):
                self.autoscaler_replicas.remove(*key, "needed")
        else:
            self.autoscaler_replicas.labels(**labels, kind="needed").set(decision.needed)
        self.autoscaler_waiting.labels(**labels).set(1 if decision.action == "Wait" else 0)

    def observe_input_lag(self, labels: Mapping[str, str], lag: int | None) -> None:
        """Mirror status.inputLag; an app with no report yet has no sample rather than a false 0, so an
        autoscaler does not scale in on a number nobody measured."""
        if lag is None:
            with contextlib.suppress(KeyError):
                self.input_lag.remove(*(labels[name] for name in _LABELS))
            return
        self.input_lag.labels(**labels).set(lag)
