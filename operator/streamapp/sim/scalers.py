"""Who sets a simulated app's replicas: nobody, the operator's autoscaler, or KEDA and the HPA.

The simulator hands every scaler the same `Snapshot` each tick — what happened in the last tick, and
the assignment as the operator holds it — and each scaler reads from it only what its real counterpart
could read:

- **The operator's autoscaler** (`streamapp`) runs the real decision core (`rebalance.autoscaler`) on
  facts built the way the operator builds them: the input and processed rates and each member's true
  rate (records over busy seconds) over the last `RATE_WINDOW` seconds, the input lag, the warmups of
  the assignment with the lags their members reported, the owners' reported restore rows. The members'
  figures reach the operator in their progress reports, so the facts are refreshed every
  `PROGRESS_SECONDS` (the executor's default progress interval), not every tick.
- **KEDA and the HPA** (`keda-hpa`) read the input lag the operator exports, as Prometheus last
  scraped it, at each HPA sync (`sim/kedahpa.py`); the gauge itself changes at the same progress
  reports.

A scaler returns the `spec.replicas` it writes (None: it writes nothing).
"""

from __future__ import annotations

import random
import statistics
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from streamapp.rebalance import RebalanceConfig
from streamapp.rebalance.autoscaler import (
    AutoscalerConfig,
    AutoscalerState,
    MemberRate,
    ScaleDecision,
    ScaleFacts,
    WarmupLag,
    decide,
)
from streamapp.sim.kedahpa import KedaHpa, KedaHpaConfig

AutoscalerKind = Literal["none", "streamapp", "keda-hpa"]
AUTOSCALERS: tuple[AutoscalerKind, ...] = ("none", "streamapp", "keda-hpa")
RATE_WINDOW = 30.0
"""Seconds the rates are measured over (a Prometheus `rate(...[30s])`'s span)."""
PROGRESS_SECONDS = 10.0
"""How often members' progress figures (input lag, rates) reach the operator: the executor writes
progress alone at most every 10 s (`STREAMAPP_PROGRESS_INTERVAL`)."""


@dataclass(frozen=True)
class MemberTick:
    """One member in one tick: whether its pod is ready, the tasks it processes, and the records it
    processed and the seconds it was busy doing so."""

    id: int
    ready: bool
    active: int
    processed: float
    busy: float


@dataclass(frozen=True)
class Snapshot:
    """What the last tick left: the app's size (`spec.replicas`, and `status.replicas`: members whose pod
    exists), records that arrived, the input lag, each member's tick, the warmups with their reported
    lags, the owners' reported restore rows, and what member pods are made from."""

    now: float
    tick: float
    replicas: int
    existing: int
    partitions: int
    arrived: float
    input_lag: float
    members: tuple[MemberTick, ...]
    warmups: tuple[WarmupLag, ...]
    restore_rows: int | None
    restore_rate: float | None
    pod_start_seconds: float | None
    revision: str


class Scaler(Protocol):
    """Sets the replicas of a simulated app."""

    def step(self, snapshot: Snapshot) -> int | None:
        """The replicas to write now, if any."""
        ...


class NoScaler:
    """Nobody scales: the scenario's own `scale` events do."""

    def step(self, snapshot: Snapshot) -> int | None:
        """Writes nothing."""
        return None


@dataclass
class _Window:
    """Per-tick figures of the last `RATE_WINDOW` seconds."""

    ticks: deque[Snapshot] = field(default_factory=deque)

    def add(self, snapshot: Snapshot) -> None:
        self.ticks.append(snapshot)
        while self.ticks and self.ticks[0].now <= snapshot.now - RATE_WINDOW:
            self.ticks.popleft()

    def seconds(self) -> float:
        return sum(s.tick for s in self.ticks)

    def recent_input_rate(self) -> float | None:
        """Records a second arriving over the newest third of the window (the operator's newest pair of
        rate anchors spans about that)."""
        if not self.ticks:
            return None
        newest = [s for s in self.ticks if s.now > self.ticks[-1].now - RATE_WINDOW / 3]
        seconds = sum(s.tick for s in newest)
        return sum(s.arrived for s in newest) / seconds if seconds else None

    def rate(self, member: int) -> float | None:
        """A member's true rate: records processed over seconds busy (None when it was never busy)."""
        processed = busy = 0.0
        for snapshot in self.ticks:
            for m in snapshot.members:
                if m.id == member:
                    processed += m.processed
                    busy += m.busy
        return processed / busy if busy > 0 else None


@dataclass
class StreamAppScaler:
    """The operator's autoscaler around the real decision core; `decisions` keeps every decision that
    changed the size or what it waits for, with its time."""

    config: AutoscalerConfig
    rebalance: RebalanceConfig
    state: AutoscalerState = field(default_factory=AutoscalerState)
    window: _Window = field(default_factory=_Window)
    facts: ScaleFacts | None = None
    next_report: float = 0.0
    decisions: list[tuple[float, ScaleDecision]] = field(default_factory=list)

    def step(self, snapshot: Snapshot) -> int | None:
        """Measure, refresh the facts at the progress reports, decide."""
        self.window.add(snapshot)
        if self.facts is None or snapshot.now >= self.next_report:
            self.facts = self._facts(snapshot)
            self.next_report = snapshot.now + PROGRESS_SECONDS
        # Pods and the assignment are the operator's own, now; a warmup reaching the lag it is waited
        # for is reported at once (`lagThresholds`); rates and the input lag only at progress reports.
        facts = replace(
            self.facts, replicas=snapshot.replicas, members=self._members(snapshot), warmups=snapshot.warmups
        )
        decision = decide(self.config, self.rebalance, facts, self.state, snapshot.now)
        last = self.decisions[-1][1] if self.decisions else None
        if last is None or (decision.replicas, decision.action, decision.waiting_for != "") != (
            last.replicas,
            last.action,
            last.waiting_for != "",
        ):
            self.decisions.append((snapshot.now, decision))
        self.state = decision.state
        return decision.replicas

    def _members(self, snapshot: Snapshot) -> tuple[MemberRate, ...]:
        """Pods and task counts as the operator sees them now; rates as last reported."""
        reported = {m.id: m.rate for m in self.facts.members} if self.facts else {}
        return tuple(MemberRate(m.id, m.ready, m.active, reported.get(m.id)) for m in snapshot.members)

    def _facts(self, snapshot: Snapshot) -> ScaleFacts:
        seconds = self.window.seconds()
        ticks = self.window.ticks
        return ScaleFacts(
            replicas=snapshot.replicas,
            partitions=snapshot.partitions,
            input_rate=sum(s.arrived for s in ticks) / seconds if seconds else None,
            recent_input_rate=self.window.recent_input_rate(),
            throughput=sum(m.processed for s in ticks for m in s.members) / seconds if seconds else None,
            input_lag=round(snapshot.input_lag),
            members=tuple(
                MemberRate(m.id, m.ready, m.active, self.window.rate(m.id)) for m in snapshot.members
            ),
            warmups=snapshot.warmups,
            restore_rows=snapshot.restore_rows,
            restore_rate=snapshot.restore_rate,
            pod_start_seconds=snapshot.pod_start_seconds,
            revision=snapshot.revision,
        )


@dataclass
class KedaHpaScaler:
    """KEDA's Prometheus scaler and the HPA: the exported lag (refreshed at the progress reports),
    scraped every `scrape_interval`, read at every HPA sync. The scrape and the sync start at offsets
    drawn from `seed` (their phases against the trace are not ours to choose)."""

    config: KedaHpaConfig
    seed: int = 0
    hpa: KedaHpa = field(init=False)
    gauge: float = 0.0
    scraped: float = 0.0
    next_report: float = 0.0
    next_scrape: float = field(init=False)
    next_sync: float = field(init=False)

    def __post_init__(self) -> None:
        self.hpa = KedaHpa(self.config)
        phases = random.Random(self.seed)
        self.next_scrape = phases.uniform(0, self.config.scrape_interval)
        self.next_sync = phases.uniform(0, self.config.sync)

    def step(self, snapshot: Snapshot) -> int | None:
        """The replicas the HPA writes at a sync; None between syncs."""
        now = snapshot.now
        if now >= self.next_report:
            self.gauge = snapshot.input_lag
            self.next_report = now + PROGRESS_SECONDS
        if now >= self.next_scrape:
            self.scraped = self.gauge
            self.next_scrape += self.config.scrape_interval
        if now < self.next_sync:
            return None
        self.next_sync += self.config.sync
        return self.hpa.sync(now, self.scraped, snapshot.replicas, snapshot.existing)


def median_rows(rows: list[int]) -> int | None:
    """The typical task's restore rows from the owners' reports."""
    return round(statistics.median(rows)) if rows else None
