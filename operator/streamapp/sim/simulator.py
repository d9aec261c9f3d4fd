"""The simulation loop: the real engine, a simulated operator shell, simulated executors.

Each tick: scheduled disruptions fire, pods become ready, then the control loop runs — the engine
plans, executors apply their targets and acknowledge, the engine plans again — until nothing changes.
That exchange takes milliseconds in a cluster, below this simulator's resolution of records per
second, so it happens at one instant; but executors apply their targets one by one, new owners
first, and single ownership is checked after every single apply, so an engine that handed a task
over before the old owner let go would be caught. A member the engine says timed out on a revocation
has its pod deleted and replaced, as the operator does. Then data flows for one tick: input arrives,
owners restore (blocking) and process, copies tail the changelog in the background. Reports go out
every `reportInterval`; the costs a rolling update's `auto` weighs come from them by the operator's
own rules (`rebalance.costs`), and are kept between reports as the operator keeps them. With a
`contention` model, batches that still run are slowed by what else runs on the cores, and the stall is
counted as the cluster benchmark measures it (`stall`); nothing else depends on it.

An autoscaler (`sim/scalers.py`) may set the replicas at the start of each tick, from what the last
tick left: the operator's own, or KEDA and the HPA. The input rate may follow a trace
(`sim/traces.py`), a member's processing may be bounded by its rate (`sim/sharing.py`), and what each
autoscaler costs and delivers is measured throughout (`measured.ScaleMeter`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from streamapp.rebalance import AppConfig, Assignment, EventKind, MemberView, Plan, member_targets, plan
from streamapp.rebalance.autoscaler import WarmupLag
from streamapp.rebalance.costs import (
    Costs,
    Sample,
    expected_return,
    handoff_seconds,
    merged,
    restart_seconds,
)
from streamapp.rebalance.rollout import MemberPod, RolloutStep, settled_step
from streamapp.rebalance.stuck import replace_stuck
from streamapp.sim.executors import Executor
from streamapp.sim.measured import ScaleMeter, SimResult, Timeline, min_window_ratio
from streamapp.sim.scalers import (
    KedaHpaScaler,
    MemberTick,
    NoScaler,
    Scaler,
    Snapshot,
    StreamAppScaler,
    median_rows,
)
from streamapp.sim.scenario import Scenario, SimEvent
from streamapp.sim.sharing import Restored, restore_shares, shares
from streamapp.sim.stall import StallMeter

_CONTROL_ROUNDS = 50
_EPSILON = 1e-6


class Simulation:
    """One run of one scenario under the protocol its `rebalance` block names."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.work = scenario.workload
        self.app = AppConfig(scenario.partitions, scenario.members, scenario.rebalance)
        self.executors: dict[int, Executor] = {}
        self.log_end = [float(self.work.state_records)] * scenario.partitions
        self.backlog = [0.0] * scenario.partitions
        self.assignment = Assignment.empty(scenario.partitions)
        self.last_owner: list[int | None] = [None] * scenario.partitions
        # When each task last processed, and on which member (what the commit manifests record).
        self.processed_at: list[float | None] = [None] * scenario.partitions
        self.processed_by: list[int | None] = [None] * scenario.partitions
        self.costs = Costs(claims=self.work.local_state == "claim", pod_start=self.work.pod_start_seconds)
        self.in_place_restarts = 0
        self.stuck_replacements = 0
        self.pending = list(scenario.events)
        self.revision = 0
        self.pod_revision: dict[int, int] = {}
        self.retiring: dict[int, float] = {}
        self.upcoming: frozenset[int] = frozenset()
        self.timeline = Timeline()
        self.movements = 0
        self.violations = 0
        self.blocking = 0.0
        self.background = 0.0
        self.downtime = [0.0] * scenario.partitions
        # Per task: how long it has not processed so far (its current stand-still), and the longest.
        self.standing = [0.0] * scenario.partitions
        self.longest_standstill = 0.0
        contention = self.work.contention
        self.stall = StallMeter(scenario.partitions, contention.cadence if contention else 1.0)
        self.processed: list[float] = []
        self.balanced_since: float | None = None
        self.base_generation = 0
        self.revocation_timeouts = 0
        self.wasted_warmups = 0
        # Members killed whose death the operator has not seen yet: until when it sees them ready.
        self.unnoticed: dict[int, float] = {}
        # Members whose pods the rollout deleted to restart them in place, until they are ready again.
        self.replaced: set[int] = set()
        self.now = 0.0
        ticks = round(scenario.duration / scenario.tick)
        self.rates = scenario.trace.series(ticks, scenario.tick) if scenario.trace else None
        self.scaler = self._scaler()
        self.meter = ScaleMeter(scenario.autoscaling.lag_seconds)
        self.arrived: list[float] = []
        # Per member in the last tick: records processed and seconds busy.
        self.member_work: dict[int, tuple[float, float]] = {}
        # Which member processed each task in the last tick.
        self.serving: dict[int, int] = {}

    def run(self) -> SimResult:
        """Warm start, then tick until the scenario's duration."""
        self._warm_start()
        ticks = round(self.scenario.duration / self.scenario.tick)
        for step in range(ticks):
            self._tick(step * self.scenario.tick)
        return self._result()

    def _warm_start(self) -> None:
        """The app has been running before time 0: every owner and copy is current."""
        for member in range(self.scenario.members):
            executor = self._new_executor(member)
            executor.alive = True
        for fresh in self.work.contention.fresh if self.work.contention else ():
            self.executors[fresh.member].started_at = -fresh.ready_before
            self.executors[fresh.member].start_kind = fresh.start
        for _ in range(_CONTROL_ROUNDS):
            changed = self._control(0.0).changed
            for executor in self.executors.values():
                executor.starting.clear()
                for task in (*executor.processing, *executor.copies):
                    executor.applied[task] = self.log_end[task]
                executor.report(self.log_end, 0.0, 0.0, self._colds())
            if not changed:
                break
        self.base_generation = self.assignment.generation
        self.movements = 0
        self.wasted_warmups = 0
        # Running before time 0 means each task last processed on its owner just now: a move in the first
        # tick is a handoff like any later one (without this, an action at t=0 moved tasks for free).
        for task, state in enumerate(self.assignment.tasks):
            if state.active is not None:
                self.processed_at[task], self.processed_by[task] = 0.0, state.active

    def _tick(self, now: float) -> None:
        self.now = now
        tick = self.scenario.tick
        self._fire_events(now)
        self._pods(now)
        self._autoscale(now)
        self._control(now)
        processed, down = self._flow(now, tick)
        colds = self._colds()
        for executor in self.executors.values():
            executor.report(self.log_end, now + tick, self.work.report_interval, colds)
        self.processed.append(processed)
        self._observe(now + tick, processed, down)

    def _fire_events(self, now: float) -> None:
        while self.pending and self.pending[0].at <= now:
            self._fire(self.pending.pop(0), now)

    def _fire(self, event: SimEvent, now: float) -> None:
        if event.scale is not None:
            self._resize(event.scale, now)
        elif event.kill is not None:
            victim = self.executors.get(event.kill)
            if victim is not None:
                victim.die()
                self.unnoticed[event.kill] = now + self.work.detect_seconds
                if event.restart_after is not None:
                    victim.start_pod(now + event.restart_after, "restarted")
        elif event.deafen is not None:
            deaf = self.executors.get(event.deafen)
            if deaf is not None:
                deaf.deaf = True
        elif event.stall is not None:
            stalled = self.executors.get(event.stall)
            if stalled is not None and stalled.alive:
                stalled.deaf = True
                stalled.stalled_since = now
        elif event.rolling_restart:
            self.revision += 1

    def _resize(self, replicas: int, now: float) -> None:
        """spec.replicas := `replicas`: pods for the members that have none; the engine drains the rest."""
        self.app = AppConfig(self.app.partitions, replicas, self.app.rebalance)
        for member in range(replicas):
            if member not in self.executors:
                self._new_executor(member).start_pod(now + self.work.pod_start("new"), "new")

    def _scaler(self) -> Scaler:
        scenario = self.scenario
        if scenario.autoscaler == "streamapp":
            return StreamAppScaler(scenario.autoscaling, scenario.rebalance)
        if scenario.autoscaler == "keda-hpa" and scenario.keda is not None:
            return KedaHpaScaler(scenario.keda, scenario.trace.seed if scenario.trace else 0)
        return NoScaler()

    def _autoscale(self, now: float) -> None:
        """The autoscaler reads what the last tick left and may set the replicas."""
        if self.arrived:
            replicas = self.scaler.step(self._snapshot(now))
            if replicas is not None and replicas != self.app.replicas:
                self._resize(replicas, now)

    def _snapshot(self, now: float) -> Snapshot:
        active: dict[int, int] = {}
        warmups = []
        views = {v.id: v for v in self._views()}
        for task, state in enumerate(self.assignment.tasks):
            if state.active is not None and state.revoking_since is None:
                active[state.active] = active.get(state.active, 0) + 1
            for member in state.warmups:
                lag = views[member].lags.get(task) if member in views else None
                warmups.append(WarmupLag(task, member, state.active, lag))
        rows = [r for e in self.executors.values() for r in e.reported_rows.values()]
        return Snapshot(
            now=now,
            tick=self.scenario.tick,
            replicas=self.app.replicas,
            existing=self._existing(),
            partitions=self.app.partitions,
            arrived=self.arrived[-1],
            input_lag=sum(self.backlog),
            members=tuple(
                MemberTick(m, e.alive, active.get(m, 0), *self.member_work.get(m, (0.0, 0.0)))
                for m, e in sorted(self.executors.items())
                if e.alive or e.ready_at is not None
            ),
            warmups=tuple(warmups),
            restore_rows=median_rows(rows),
            restore_rate=self.work.restore_rate,
            pod_start_seconds=self.work.pod_start_seconds,
            revision=str(self.revision),
        )

    def _existing(self) -> int:
        """Members whose pod exists (starting, ready or draining): what executors cost."""
        return sum(1 for e in self.executors.values() if e.alive or e.ready_at is not None)

    def _colds(self) -> list[float]:
        """Per task, where a copy without local state starts: past what the store compacted away."""
        cap = self.work.max_restore_records
        return [0.0 if cap is None else max(0.0, end - cap) for end in self.log_end]

    def _capacity(self, executor: Executor) -> float:
        """A member's true rate: `memberRate`, or each of its tasks' `processRate` without one."""
        if self.work.member_rate is not None:
            return self.work.member_rate
        return self.work.process_rate * max(1, len(executor.processing))

    def _pods(self, now: float) -> None:
        for executor in self.executors.values():
            if executor.become_ready(now):
                self.replaced.discard(executor.id)
        self._roll(now)

    def _roll(self, now: float) -> RolloutStep:
        """The operator's rollout: retire members with an old pod, replace those that handed off."""
        pods = {
            m: MemberPod(m, str(self.pod_revision.get(m, 0)), e.alive, self.retiring.get(m), e.started_at)
            for m, e in self.executors.items()
            if e.alive or e.ready_at is not None
        }
        active: dict[int, int] = {}
        for state in self.assignment.tasks:
            if state.active is not None:
                active[state.active] = active.get(state.active, 0) + 1
        warm = self.app.rebalance.state_aware
        update = self.scenario.rolling_update
        self.costs = merged(self.costs, self._measured())
        # As the operator sees them: it keeps no memory of the members it last named upcoming.
        views = [replace(v, upcoming=False) for v in self._views()]
        step = settled_step(
            pods, self.app.replicas, str(self.revision), update, now, warm, self.costs, self.assignment, views
        )
        stalled = {m: e.stalled_since for m, e in self.executors.items() if e.stalled_since is not None}
        timeout = self.app.rebalance.batch_timeout
        step = replace_stuck(step, pods, stalled, self.app.replicas, timeout, update.max_unavailable, now)
        self.retiring = dict(step.retiring)
        self.upcoming = frozenset(step.upcoming)
        self.in_place_restarts += sum(1 for m in step.delete if active.get(m, 0) > 0 and m not in step.stuck)
        self.stuck_replacements += len(step.stuck)
        self.replaced |= set(step.delete) - set(step.stuck)  # a hang is a failure, not a planned restart
        for member in step.delete:
            victim = self.executors[member]
            victim.die()
            victim.start_pod(now + self.work.pod_start("replaced"), "replaced")
            self.pod_revision[member] = self.revision
        return step

    def _measured(self) -> Costs:
        """The costs the live members' last reports measure (a replaced pod's reports are dropped)."""
        reports = {m: list(e.reported_resumed.values()) for m, e in self.executors.items() if e.alive}
        restart = {m: r for m, found in reports.items() if (r := restart_seconds(found)) is not None}
        handoffs: list[Sample] = [sample for found in reports.values() for sample in found]
        return Costs(restart, handoff_seconds(handoffs), self.costs.claims)

    def _control(self, now: float) -> Plan:
        """Plan and apply until quiescent; returns the last plan (changed if any round changed)."""
        any_change = False
        result = plan(self.app, self._views(), self.assignment, now)
        for _ in range(_CONTROL_ROUNDS):
            self._adopt(result)
            self._replace(result.timed_out, now)
            any_change |= result.changed
            applied = self._apply_all()
            removed = self._remove(result.removable)
            if not (result.changed or applied or removed):
                break
            result = plan(self.app, self._views(), self.assignment, now)
        return Plan(
            result.assignment, any_change, result.wake_at, result.events, result.removable, result.reason
        )

    def _adopt(self, result: Plan) -> None:
        self.assignment = result.assignment
        cancelled = (e.tasks for e in result.events if e.kind == EventKind.WARMUP_CANCELLED)
        self.wasted_warmups += sum(len(tasks) for tasks in cancelled)
        for task, state in enumerate(result.assignment.tasks):
            if state.active is None:
                continue
            if self.last_owner[task] is not None and state.active != self.last_owner[task]:
                self.movements += 1
            self.last_owner[task] = state.active

    def _replace(self, timed_out: tuple[int, ...], now: float) -> None:
        """Delete the pods of members that never acknowledged, and start new ones."""
        for member in timed_out:
            executor = self.executors[member]
            executor.die()
            executor.start_pod(now + self.work.pod_start("replaced"), "replaced")
            self.revocation_timeouts += 1

    def _apply_all(self) -> bool:
        """Executors apply their targets one at a time, gaining members first; check after each."""
        generation = self.assignment.generation
        targets = member_targets(self.assignment)
        stale = [e for e in self.executors.values() if e.listening() and e.acked < generation]

        def gains(executor: Executor) -> int:
            target = targets.get(executor.id)
            return -len(set(target.active) - executor.processing) if target else 0

        for executor in sorted(stale, key=lambda e: (gains(e), e.id)):
            executor.apply(targets.get(executor.id), generation, self.processed_by)
            self._check_single_owner()
        return bool(stale)

    def _remove(self, removable: tuple[int, ...]) -> bool:
        """The operator deletes drained members: pod and local state."""
        gone = [m for m in removable if m in self.executors and m >= self.app.replicas]
        for member in gone:
            self.executors.pop(member).die()
        return bool(gone)

    def _check_single_owner(self) -> None:
        seen: set[int] = set()
        for executor in self.executors.values():
            if executor.alive and not seen.isdisjoint(executor.processing):
                self.violations += 1
                return
            if executor.alive:
                seen |= executor.processing

    def _flow(self, now: float, tick: float) -> tuple[float, int]:
        """Input, blocking restores and processing by owners, then background restores by copies; a
        task that processes again on a member measures how long it stood still there.

        A member's restores — its owned tasks' blocking ones and its copies' — share its restore
        throughput (`sharing.restore_shares`): what each copy may restore this tick is settled before
        anything processes, a copy wanting what it lags plus the tick's input it will tail; copies
        then take what processing left them, and any throughput left unused."""
        work = self.work
        owners: dict[int, Executor] = {}
        for executor in self.executors.values():
            if executor.alive and executor.stalled_since is None:  # a stuck round processes nothing
                for task in executor.processing:
                    owners.setdefault(task, executor)
        processed_total = 0.0
        down = 0
        stretches = self._stretches(now, tick)
        inflow = (self.rates[len(self.arrived)] if self.rates is not None else work.input_rate) * tick
        self.arrived.append(inflow * self.app.partitions)
        colds = self._colds()
        starting: dict[int, float] = {}
        for task in range(self.app.partitions):
            self.backlog[task] += inflow
            owner = owners.get(task)
            if owner is None:
                self.downtime[task] += tick
                self.standing[task] += tick
                self.stall.stood(task, tick)
                down += 1
                continue
            starting[task] = owner.spend_start(task, tick)
        granted = self._restore_shares(owners, starting, inflow, tick)
        wants: dict[int, dict[int, float]] = {}
        for task, spent in starting.items():
            owner = owners[task]
            position = max(owner.applied.get(task, 0.0), colds[task])
            share = granted[owner.id][task]
            restored = min(self.log_end[task] - position, share.records)
            busy = tick if share.done_at is None else max(spent, share.done_at)
            owner.applied[task] = position + max(0.0, restored)
            owner.blocked[task] = owner.blocked.get(task, 0.0) + max(0.0, restored)
            self.blocking += max(0.0, restored)
            self.downtime[task] += busy
            self.standing[task] += busy
            self.stall.stood(task, busy)
            if self.log_end[task] - owner.applied[task] > _EPSILON or busy >= tick:
                down += 1
                continue
            self.longest_standstill = max(self.longest_standstill, self.standing[task])
            self.standing[task] = 0.0
            self.stall.processed(task, tick - busy, stretches.get(owner.id, 0.0))
            if task in owner.resuming:
                owner.resume(task, now + busy, self.processed_at[task], self.processed_by[task])
            self.processed_at[task], self.processed_by[task] = now + tick, owner.id
            wants.setdefault(owner.id, {})[task] = min(self.backlog[task], work.process_rate * (tick - busy))
        self.member_work = {}
        self.serving = {task: member for member, wanted in wants.items() for task in wanted}
        for member, wanted in wants.items():
            capacity = self._capacity(self.executors[member])
            for task, done in shares(wanted, capacity * tick).items():
                self.backlog[task] -= done
                self.log_end[task] += done
                self.executors[member].applied[task] = self.log_end[task]
                processed_total += done
                processed, busy = self.member_work.get(member, (0.0, 0.0))
                self.member_work[member] = (processed + done, busy + done / capacity)
        for executor in self.executors.values():
            if executor.alive:
                self._tail(executor, granted.get(executor.id, {}), colds, tick)
        return processed_total, down

    def _restore_shares(
        self, owners: dict[int, Executor], starting: dict[int, float], inflow: float, tick: float
    ) -> dict[int, dict[int, Restored]]:
        """Per live member, what each of its restoring copies may restore this tick: its owned tasks
        (from the end of their start) and its copies (what they lag plus the tick's input to tail)
        share its restore throughput."""
        colds = self._colds()
        granted: dict[int, dict[int, Restored]] = {}
        for executor in self.executors.values():
            if not executor.alive:
                continue
            wants: dict[int, float] = {}
            for task in executor.copies:
                wants[task] = self.log_end[task] - max(executor.applied.get(task, 0.0), colds[task]) + inflow
            owned = [task for task in starting if owners[task] is executor]
            for task in owned:
                wants[task] = self.log_end[task] - max(executor.applied.get(task, 0.0), colds[task])
            ready = {task: starting[task] for task in owned}
            granted[executor.id] = restore_shares(wants, ready, self.work.restore_rate, tick)
        return granted

    def _tail(
        self, executor: Executor, granted: dict[int, Restored], colds: list[float], tick: float
    ) -> None:
        """The member's copies restore in the background: each what it was granted, then what the
        member's throughput has left this tick, shared among those still behind."""
        behind: dict[int, float] = {}
        used = sum(share.records for task, share in granted.items() if task not in executor.copies)
        for task in sorted(executor.copies):
            position = max(executor.applied.get(task, 0.0), colds[task])
            restored = min(self.log_end[task] - position, granted[task].records if task in granted else 0.0)
            executor.applied[task] = position + restored
            self.background += restored
            used += restored
            behind[task] = self.log_end[task] - executor.applied[task]
        left = max(0.0, self.work.restore_rate * tick - used)
        for task, extra in shares({t: b for t, b in behind.items() if b > _EPSILON}, left).items():
            executor.applied[task] += extra
            self.background += extra

    def _stretches(self, now: float, tick: float) -> dict[int, float]:
        """How much each live executor's batches stretch this tick (`contention`: empty without it),
        from the executors running, the pods starting and the copies restoring as the tick begins."""
        model = self.work.contention
        if model is None:
            return {}
        live = [e for e in self.executors.values() if e.alive]
        starting = Counter(
            e.start_kind
            for e in self.executors.values()
            if not e.alive and e.ready_at is not None and e.start_kind is not None
        )
        behind = [
            sum(
                max(0.0, self.log_end[task] - e.applied.get(task, 0.0)) for task in (*e.processing, *e.copies)
            )
            for e in live
        ]
        restoring = sum(min(1.0, lag / (self.work.restore_rate * tick)) for lag in behind)
        started = [(e.start_kind, now - e.started_at) for e in live]
        load = model.load(started, starting, restoring)
        return {e.id: model.stretch(load, kind, age) for e, (kind, age) in zip(live, started, strict=True)}

    def _observe(self, now: float, processed: float, down: int) -> None:
        tick = self.scenario.tick
        expected = self.arrived[-1]
        lag, existing = self._lag_seconds(), self._existing()
        self.meter.observe(tick, existing, lag, sum(self.backlog), self.app.replicas)
        self.timeline.input_rate.append(expected / tick)
        self.timeline.replicas.append(self.app.replicas)
        self.timeline.executors.append(existing)
        self.timeline.lag_seconds.append(lag)
        self.timeline.time.append(now)
        self.timeline.throughput_ratio.append(processed / expected if expected else 0.0)
        self.timeline.tasks_down.append(down)
        self.timeline.warming.append(sum(1 for t in self.assignment.tasks if t.warmups))
        self.timeline.generation.append(self.assignment.generation - self.base_generation)
        if self._balanced():
            if self.balanced_since is None:
                self.balanced_since = now
        else:
            self.balanced_since = None

    def _lag_seconds(self) -> float:
        """The input lag in seconds of processing: each processing member's waiting records over its
        rate, a task nobody processes alone over one member's rate; the worst counts."""
        waiting: dict[int, float] = {}
        worst = 0.0
        one = self.work.member_rate if self.work.member_rate is not None else self.work.process_rate
        for task, backlog in enumerate(self.backlog):
            owner = self.serving.get(task)
            if owner is None:
                worst = max(worst, backlog / one)
            else:
                waiting[owner] = waiting.get(owner, 0.0) + backlog
        for member, backlog in waiting.items():
            worst = max(worst, backlog / self._capacity(self.executors[member]))
        return worst

    def _live(self) -> list[int]:
        return [m for m, e in self.executors.items() if e.alive and m < self.app.replicas]

    def _spread(self) -> int:
        counts = dict.fromkeys(self._live(), 0)
        for state in self.assignment.tasks:
            if state.active in counts:
                counts[state.active] += 1
        return max(counts.values()) - min(counts.values()) if counts else 0

    def _balanced(self) -> bool:
        live = set(self._live())
        return (
            bool(live)
            and not self.assignment.in_flight()
            and not self.assignment.reservations
            and all(t.active in live for t in self.assignment.tasks)
            and self._spread() <= 1
            and all(m < self.app.replicas for m in self.executors)
        )

    def _new_executor(self, member: int) -> Executor:
        zones = self.scenario.zones
        executor = Executor(
            member,
            zones[member % len(zones)] if zones else None,
            self.work.task_start_seconds,
            self.work.reassign_seconds,
            keeps_state=self.work.local_state == "claim",
            restore_rate=self.work.restore_rate,
        )
        self.executors[member] = executor
        return executor

    def _views(self) -> list[MemberView]:
        """What the operator observes; a lost member's expected return by the operator's rule, from the
        restarts measured so far and the pod start the app's pods took before time 0."""
        views = []
        for m, e in sorted(self.executors.items()):
            view = e.view()
            if not view.alive and self.now < self.unnoticed.get(m, 0.0):
                view = replace(view, alive=True, returning=False)
            pod_start = self.work.pod_start_seconds
            back = None if view.alive else expected_return(m, self.costs.restart, pod_start)
            planned = m in self.replaced
            views.append(
                replace(
                    view,
                    retiring=m in self.retiring,
                    upcoming=m in self.upcoming,
                    return_seconds=back,
                    replaced=planned,
                )
            )
        return views

    def _result(self) -> SimResult:
        scenario = self.scenario
        expected = sum(self.arrived) / scenario.duration if scenario.duration else 0.0
        total = sum(self.processed)
        last_event = max((e.at for e in scenario.events), default=0.0)
        balanced = self._balanced()
        since = self.balanced_since
        return SimResult(
            scenario=scenario.name,
            protocol=scenario.rebalance.protocol,
            generations=self.assignment.generation - self.base_generation,
            task_movements=self.movements,
            blocking_restore_records=round(self.blocking),
            background_restore_records=round(self.background),
            task_downtime_seconds=round(sum(self.downtime), 3),
            max_task_downtime_seconds=round(max(self.downtime, default=0.0), 3),
            longest_standstill_seconds=round(max(self.longest_standstill, *self.standing), 3),
            stall_seconds=round(self.stall.total(), 3),
            max_task_stall_seconds=round(self.stall.worst_task(), 3),
            longest_stall_seconds=round(self.stall.longest_gap(), 3),
            double_ownership_violations=self.violations,
            converged=balanced,
            final_spread=self._spread(),
            time_to_balance_seconds=round(max(0.0, since - last_event), 3)
            if balanced and since is not None
            else None,
            processed_records=round(total),
            throughput_ratio=round(total / (expected * scenario.duration), 4) if scenario.duration else 0.0,
            min_window_throughput_ratio=round(min_window_ratio(self.processed, scenario.tick, expected), 4),
            revocation_timeouts=self.revocation_timeouts,
            wasted_warmups=self.wasted_warmups,
            in_place_restarts=self.in_place_restarts,
            stuck_replacements=self.stuck_replacements,
            autoscaler=scenario.autoscaler,
            executor_seconds=round(self.meter.executor_seconds, 1),
            lag_over_target_seconds=round(self.meter.over_target, 1)
            if self.meter.target is not None
            else None,
            reversals=self.meter.reversals(),
            resizes=len(self.meter.sizes) - 1,
            worst_lag_seconds=round(self.meter.worst_seconds, 1),
            worst_lag_records=round(self.meter.worst_records),
        )


def simulate(scenario: Scenario) -> tuple[SimResult, Timeline]:
    """Run one scenario under its configured protocol."""
    simulation = Simulation(scenario)
    result = simulation.run()
    return result, simulation.timeline
