"""The simulator against the shipped scenarios, and its checks against a deliberately broken engine."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import streamapp.sim.simulator as simulator
from streamapp.cli import main
from streamapp.controller.costreports import Sample
from streamapp.rebalance import PROTOCOLS, Assignment, Plan, TaskAssignment
from streamapp.rebalance.rollout import RolloutConfig
from streamapp.sim.executors import Executor
from streamapp.sim.measured import SimResult
from streamapp.sim.scenario import Scenario, ScenarioError, SimEvent, load_scenario, parse_scenario
from streamapp.sim.simulator import Simulation, simulate

SCENARIOS = Path(__file__).parents[2] / "bench" / "scenarios"
JSON_KEYS = set(SimResult.__dataclass_fields__)


def run(name: str, protocol: str) -> SimResult:
    scenario = load_scenario(SCENARIOS / f"{name}.yaml")
    return simulate(scenario.with_protocol(protocol))[0]  # type: ignore[arg-type]


def _scenario_param(path: Path) -> object:
    """A scenario as a test parameter; the 900-task headline (~18 s a protocol, the slowest of the
    unbuilt tests on a cold make test) runs in make test-long."""
    marks = [pytest.mark.long] if path.stem == "headline-900" else []
    return pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", [_scenario_param(p) for p in sorted(SCENARIOS.glob("*.yaml"))])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_protocol_ever_double_owns(path: Path, protocol: str) -> None:
    result, _ = simulate(load_scenario(path).with_protocol(protocol))  # type: ignore[arg-type]
    assert result.double_ownership_violations == 0
    assert result.converged


def test_streamapp_scales_out_without_downtime() -> None:
    result = run("scale-out", "streamapp")
    assert result.task_downtime_seconds == 0
    assert result.blocking_restore_records == 0
    assert result.task_movements == 6
    assert result.final_spread == 0
    cooperative = run("scale-out", "cooperative")
    assert cooperative.task_downtime_seconds > 0 and cooperative.blocking_restore_records > 0


def test_streamapp_scales_in_without_downtime() -> None:
    result = run("scale-in", "streamapp")
    assert result.task_downtime_seconds == 0 and result.converged


def test_bounce_within_delay_moves_nothing() -> None:
    result = run("bounce", "streamapp")
    assert result.task_movements == 0
    assert result.blocking_restore_records == 0
    eager = run("bounce", "eager")
    assert eager.task_movements > 0 and eager.blocking_restore_records > 0


def test_a_bounce_restores_in_full_without_a_claim() -> None:
    """The returning pod's emptyDir is new: every task it gets back restores its whole state while
    blocking, as the real executor does without `executor.storage.size`."""
    with_claim = run("bounce", "streamapp")
    without = run("bounce-emptydir", "streamapp")
    scenario = load_scenario(SCENARIOS / "bounce-emptydir.yaml")
    held = scenario.partitions // scenario.members
    assert with_claim.blocking_restore_records == 0
    assert without.blocking_restore_records >= held * scenario.workload.state_records
    assert without.task_downtime_seconds > with_claim.task_downtime_seconds


def test_standby_failover_removes_loss_downtime() -> None:
    with_standby = run("permanent-loss-standby", "streamapp")
    without = run("permanent-loss", "streamapp")
    assert with_standby.task_downtime_seconds == 0
    restore = load_scenario(SCENARIOS / "permanent-loss.yaml").workload.state_records / 2000
    assert without.max_task_downtime_seconds >= restore  # restored elsewhere (not held for the delay)


def test_a_handoff_without_acknowledgement_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector must fire when an engine hands a task over before its owner lets go."""
    real_plan = simulator.plan

    def hasty(app, members, previous, now):  # type: ignore[no-untyped-def]
        result: Plan = real_plan(app, members, previous, now)
        tasks = list(result.assignment.tasks)
        for index, task in enumerate(tasks):
            if task.revoking_since is not None and task.warmups:
                tasks[index] = TaskAssignment(task.warmups[0], task.epoch + 1)
        assignment: Assignment = replace(result.assignment, tasks=tuple(tasks))
        return replace(result, assignment=assignment, changed=assignment != previous)

    monkeypatch.setattr(simulator, "plan", hasty)
    assert run("scale-out", "streamapp").double_ownership_violations > 0


def test_json_lines_carry_every_key(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        [
            "simulate",
            str(SCENARIOS / "bounce.yaml"),
            "--protocol",
            "eager",
            "--protocol",
            "streamapp",
            "--json",
        ]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert status == 0 and len(lines) == 2
    for line, protocol in zip(lines, ["eager", "streamapp"], strict=True):
        record = json.loads(line)
        assert set(record) == JSON_KEYS and record["protocol"] == protocol


def test_table_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "timeline.png"
    assert (
        main(["simulate", str(SCENARIOS / "bounce.yaml"), "--protocol", "cooperative", "--plot", str(png)])
        == 0
    )
    out = capsys.readouterr().out
    assert "task movements" in out and "cooperative" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_scenario_is_reported_with_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\npartitions: 4\nmembers: 2\nduration: 60\nworkload: {inputRate: -1}\n")
    assert main(["simulate", str(bad)]) == 2
    assert "workload.inputRate" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"name": "x", "partitions": 0, "members": 1, "duration": 10}, "partitions"),
        ({"name": "x", "partitions": 1, "members": 1}, "duration"),
        ({"name": "x", "partitions": 1, "members": 1, "duration": 10, "colour": 1}, "unknown key"),
        ({"name": "x", "partitions": 1, "members": 1, "duration": 10, "events": [{"at": 5}]}, "exactly one"),
        (
            {
                "name": "x",
                "partitions": 1,
                "members": 1,
                "duration": 10,
                "events": [{"at": 1, "scale": 2, "restartAfter": 3}],
            },
            "restartAfter",
        ),
        (
            {"name": "x", "partitions": 1, "members": 1, "duration": 10, "rebalance": {"protocol": "x"}},
            "protocol",
        ),
        (
            {"name": "x", "partitions": 1, "members": 1, "duration": 10, "workload": {"localState": "pvc"}},
            "localState",
        ),
        (
            {"name": "x", "partitions": 1, "members": 1, "duration": 10, "rollingUpdate": {"strategy": "x"}},
            "strategy",
        ),
    ],
)
def test_scenario_validation(doc: dict[str, object], message: str) -> None:
    with pytest.raises((ScenarioError, ValueError), match=message):
        parse_scenario(doc)


def test_scenario_keeps_the_contract_keys() -> None:
    scenario: Scenario = load_scenario(SCENARIOS / "demo.yaml")
    assert scenario.workload.restore_rate == 2000 and scenario.rebalance.scheduled_rebalance_max_delay == 300
    assert [e.at for e in scenario.events] == sorted(e.at for e in scenario.events)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_deaf_member_is_replaced_at_the_revocation_deadline(protocol: str) -> None:
    """The member keeps processing but never acknowledges: its pod is replaced once, nothing is owned
    twice meanwhile, and the app converges; without a deadline (here: one past the run) it never does."""
    result = run("deaf-member", protocol)
    assert result.revocation_timeouts == 1
    assert result.double_ownership_violations == 0 and result.converged
    scenario = load_scenario(SCENARIOS / "deaf-member.yaml").with_protocol(protocol)  # type: ignore[arg-type]
    patient = replace(
        scenario, rebalance=replace(scenario.rebalance, revocation_timeout=10 * scenario.duration)
    )
    stalled, _ = simulate(patient)
    assert stalled.revocation_timeouts == 0 and not stalled.converged


def test_deafen_names_a_member() -> None:
    with pytest.raises(ScenarioError, match="deafen"):
        parse_scenario(
            {"name": "x", "partitions": 1, "members": 1, "duration": 1, "events": [{"at": 0, "deafen": -1}]}
        )


def handing_off(name: str) -> Scenario:
    """The scenario under streamapp with `rollingUpdate.strategy: handoff`."""
    scenario = load_scenario(SCENARIOS / f"{name}.yaml").with_protocol("streamapp")
    return replace(scenario, rolling_update=RolloutConfig(strategy="handoff"))


def test_a_rolling_restart_hands_off_first_and_no_task_goes_down() -> None:
    """Every member pod is replaced, each only after its tasks moved to warm successors: no task
    waits for a pod start, nothing restores while blocking, and the app ends balanced. `auto` does so
    where the state is small or not on a claim; `handoff` always."""
    auto = [
        load_scenario(SCENARIOS / f"{n}.yaml").with_protocol("streamapp")
        for n in ("rolling-restart-small-state", "rolling-restart-emptydir")
    ]
    for scenario in (*auto, handing_off("rolling-restart")):
        result = simulate(scenario)[0]
        assert result.task_downtime_seconds == 0 and result.in_place_restarts == 0
        assert result.blocking_restore_records == 0
        assert result.task_movements > 0
        assert result.converged and result.double_ownership_violations == 0


def test_a_rolling_restart_in_place_waits_for_each_pod() -> None:
    """`strategy: inPlace` deletes each pod at once; its tasks wait (reserved) for the new pod."""
    scenario = load_scenario(SCENARIOS / "rolling-restart.yaml")
    in_place = replace(scenario, rolling_update=RolloutConfig(strategy="inPlace"))
    result = simulate(in_place)[0]
    assert result.task_movements == 0
    assert result.task_downtime_seconds == 12 * scenario.workload.pod_start_seconds


def test_auto_restarts_in_place_the_members_measured_to_restart_faster_than_a_handoff() -> None:
    """Every member bounced once before the rollout (claim, 1-s pod start): each one's restart is
    measured at a second, less than any handoff costs, so all three restart in place although no
    handoff is measured. Less downtime than handing every member off (4 s a task here), no task
    restored in full while blocking, balanced again; as little as the cooperative protocol's."""
    scenario = load_scenario(SCENARIOS / "rolling-restart-fast-start.yaml")
    simulation = Simulation(scenario)
    result = simulation.run()
    assert result.in_place_restarts == 3 and result.task_movements == 0
    assert result.blocking_restore_records == 0
    assert result.converged and result.double_ownership_violations == 0
    assert simulation.costs.restart == {0: 1.0, 1: 1.0, 2: 1.0}
    cooperative = simulate(scenario.with_protocol("cooperative"))[0]
    assert result.task_downtime_seconds <= cooperative.task_downtime_seconds
    handing_off = simulate(replace(scenario, rolling_update=RolloutConfig(strategy="handoff")))[0]
    assert handing_off.in_place_restarts == 0
    assert result.task_downtime_seconds < handing_off.task_downtime_seconds


def test_auto_weighs_the_restore_volume_a_handoff_would_cost_against_the_restart() -> None:
    """rolling-restart.yaml: 4 tasks a member whose copies restore in ~100 s, 20-s pod starts, no
    restart measured. Warming one member's tasks on the other two takes ~200 s, ten times its expected
    restart (a pod start), so `auto` restarts every member in place — as cheap as the cooperative
    protocol and balanced as soon — where handing off took ~10 minutes. Measured by a bounce first at
    20 s, the restart still loses. With a tenth of the state (~10-s restores, ~20 s to warm a member's
    tasks) every member hands off and no task waits."""
    result = run("rolling-restart", "streamapp")
    cooperative = run("rolling-restart", "cooperative")
    assert result.in_place_restarts == 3 and result.task_movements == 0
    assert result.task_downtime_seconds <= cooperative.task_downtime_seconds
    assert result.time_to_balance_seconds is not None and cooperative.time_to_balance_seconds is not None
    assert result.time_to_balance_seconds <= cooperative.time_to_balance_seconds
    handed = simulate(handing_off("rolling-restart"))[0]
    assert handed.time_to_balance_seconds is not None
    assert handed.time_to_balance_seconds > 5 * result.time_to_balance_seconds
    scenario = load_scenario(SCENARIOS / "rolling-restart.yaml")
    bounces = tuple(SimEvent(at=at, kill=m, restart_after=20.0) for at, m in ((5, 0), (30, 1), (55, 2)))
    measured = replace(scenario, events=(*bounces, SimEvent(at=100, rolling_restart=True)))
    simulation = Simulation(measured)
    assert simulation.run().in_place_restarts == 3
    assert min(simulation.costs.restart.values()) >= 20.0
    small = replace(scenario, workload=replace(scenario.workload, state_records=20_000))
    light = simulate(small)[0]
    assert light.in_place_restarts == 0 and light.task_downtime_seconds == 0 and light.converged


def test_simulated_executors_tell_how_a_task_resumed_as_real_ones_do() -> None:
    executor = Executor(1, None, started_at=100.0, blocked={0: 0.0, 1: 50.0})
    executor.resume(0, at=104.0, last=99.0, last_owner=1)
    assert executor.resumed[0] == Sample("restart", 5.0), "processed here before this pod started"
    executor.resume(0, at=104.0, last=101.0, last_owner=1)
    assert executor.resumed[0] == Sample("handoff", 3.0), "this pod took its own task back"
    executor.resume(0, at=104.0, last=101.5, last_owner=2)
    assert executor.resumed[0] == Sample("handoff", 2.5)
    executor.resume(1, at=104.0, last=101.0, last_owner=2)
    assert executor.resumed[1] == Sample("cold", 3.0), "restored while blocking"
    executor.resume(2, at=104.0, last=None, last_owner=None)
    assert 2 not in executor.resumed, "never processed before: nothing to measure from"


def test_a_scenario_reads_its_rolling_update_block() -> None:
    doc = {"name": "x", "partitions": 1, "members": 1, "duration": 10}
    assert parse_scenario(doc).rolling_update == RolloutConfig()
    custom = parse_scenario({**doc, "rollingUpdate": {"strategy": "inPlace", "maxUnavailable": 2}})
    assert custom.rolling_update == RolloutConfig(strategy="inPlace", max_unavailable=2)
    assert parse_scenario({**doc, "workload": {"reassignSeconds": 0}}).workload.reassign_seconds == 0
    with pytest.raises(ScenarioError, match="reassignSeconds"):
        parse_scenario({**doc, "workload": {"reassignSeconds": -1}})


def with_delay(scenario: Scenario) -> Scenario:
    """The scenario under `lostTaskRecovery: delay` (Kafka's fixed delay, pre-warming from half of it)."""
    return replace(scenario, rebalance=replace(scenario.rebalance, lost_task_recovery="delay"))


def test_a_bounce_within_the_delay_wastes_no_warmup() -> None:
    """`delay`: held tasks are pre-warmed only after half the delay, and not at all while the member's
    pod is visibly starting: a member back in 30 s of 5 min, or in 200 s, finds nothing started
    elsewhere for its tasks; one whose pod never starts has them pre-warmed and handed over warm.
    Each survivor pre-warms two of its tasks, whose restores share its throughput (~115 s each alone,
    ~230 s the two): half of a 10-min delay covers them, half of bounce-slow's 5 min would not."""
    bounce = load_scenario(SCENARIOS / "bounce.yaml").with_protocol("streamapp")
    assert simulate(with_delay(bounce))[0].wasted_warmups == 0
    scenario = with_delay(load_scenario(SCENARIOS / "bounce-slow.yaml").with_protocol("streamapp"))
    late = simulate(scenario)[0]
    assert late.wasted_warmups == 0 and late.background_restore_records == 0
    longer = replace(scenario.rebalance, scheduled_rebalance_max_delay=600.0)
    never = (replace(scenario.events[0], restart_after=None),)
    gone, _ = simulate(replace(scenario, rebalance=longer, events=never, duration=1200.0))
    assert gone.background_restore_records > 0 and gone.blocking_restore_records == 0


def test_auto_waits_for_a_member_expected_back_and_insures_against_a_late_one() -> None:
    """`auto`: bounce.yaml's member is expected back in 20 s (the app's pod start) against ~100-s
    restores, and is back in 30 s: its tasks wait for it, nothing moves, and the insurance warmed
    meanwhile (within the budget, one at a time on each survivor, whose restores share its
    throughput) is thrown away. bounce-slow's is back only after 200 s: on each survivor the
    insurance takes the first of its two tasks over when restored, ~110 s after the loss, long before
    the member returns; the second, queued behind it, would end ~110 s later, after the member is
    back: it is down until the sooner of the two, as eager's restores (side by side) keep both
    of a survivor's tasks down for ~220 s."""
    bounce = run("bounce", "streamapp")
    assert bounce.task_movements == 0 and bounce.max_task_downtime_seconds <= 30 + 1
    assert 0 < bounce.wasted_warmups <= 2, "two survivors, one insurance warmup each at a time"
    scenario = load_scenario(SCENARIOS / "bounce-slow.yaml")
    event, work = scenario.events[0], scenario.workload
    assert event.restart_after is not None
    restore = (work.state_records + work.input_rate * event.at) / (work.restore_rate - work.input_rate)
    survivors = scenario.members - 1
    slow = run("bounce-slow", "streamapp")
    assert slow.blocking_restore_records == 0
    assert slow.max_task_downtime_seconds <= min(event.restart_after, 2 * restore) + 10
    assert slow.task_downtime_seconds <= survivors * (restore + event.restart_after) + 30
    assert slow.task_downtime_seconds < run("bounce-slow", "eager").task_downtime_seconds


def churn_scenario(standbys: int) -> Scenario:
    """48 tasks on 3 members: a 4th joins, then member 1 bounces for 30 s."""
    return parse_scenario(
        {
            "name": "churn",
            "partitions": 48,
            "members": 3,
            "duration": 600,
            "zones": ["a", "b", "c"],
            "workload": {"inputRate": 10, "processRate": 40, "restoreRate": 8000, "stateRecords": 20000},
            "rebalance": {"maxWarmupReplicas": 4, "standbyReplicas": standbys},
            "events": [{"at": 60, "scale": 4}, {"at": 300, "kill": 1, "restartAfter": 30}],
        }
    )


def test_standbys_cost_no_more_moves_than_failover_and_return() -> None:
    """With a standby per task, the bounced member's tasks fail over at once (no downtime) and come back
    by promoting its copies in place: the scale-out's moves plus two per held task, nothing among the
    survivors, no warmup thrown away, and no more restored than the new member's copies. Without
    standbys, `delay` holds the tasks for the member (no move), and `auto` restores them elsewhere
    (~2.5 s each, a survivor's four one after another in ~10 s, against a 20-s return: its restores
    share its throughput) and hands them back: as many moves as with standbys."""
    without, _ = simulate(with_delay(churn_scenario(0)))
    restored, _ = simulate(churn_scenario(0))
    with_standby, _ = simulate(churn_scenario(1))
    held = 48 // 4
    assert without.task_movements == 12
    assert with_standby.task_movements == without.task_movements + 2 * held == restored.task_movements
    assert with_standby.task_downtime_seconds == 0 < restored.task_downtime_seconds
    assert with_standby.wasted_warmups == 0 and with_standby.converged
    assert with_standby.task_downtime_seconds < without.task_downtime_seconds
    new_copies = 2 * held  # the new member's actives and standbys, restored once each
    tailing = 48 * 10 * 600  # every standby tails the input for the whole run
    assert with_standby.background_restore_records <= new_copies * 20000 * 1.5 + tailing


COST_SCENARIOS = sorted(p.stem for p in SCENARIOS.glob("*.yaml") if p.stem != "headline-900")


@pytest.mark.parametrize("name", COST_SCENARIOS)
def test_streamapp_never_loses_to_the_simple_protocols(name: str) -> None:
    """DESIGN §5.8 on every shipped scenario (the 900-task headline has a table of its own): bounces
    and permanent losses of small and large state, 16 tasks per member, two members lost at once, a
    member lost every three (eight) minutes, a member much later than its estimate, rolling restarts and
    scale-out. `streamapp`'s total and worst-task downtime are no worse than the better of eager and
    cooperative, within 5 task-seconds and 2 s."""
    runs = {protocol: run(name, protocol) for protocol in PROTOCOLS}
    ours = runs["streamapp"]
    for metric in ("task_downtime_seconds", "max_task_downtime_seconds"):
        best = min(getattr(runs[p], metric) for p in ("eager", "cooperative"))
        margin = 5 if metric == "task_downtime_seconds" else 2
        assert getattr(ours, metric) <= best + margin, f"{metric}: {getattr(ours, metric)} against {best}"
    assert ours.double_ownership_violations == 0 and ours.converged


@pytest.mark.parametrize("kind", ["bounce", "permanent-loss"])
@pytest.mark.parametrize("size", ["small", "large"])
def test_a_lost_task_is_down_about_the_sooner_of_its_members_return_and_a_restore(
    kind: str, size: str
) -> None:
    """The aim of `lostTaskRecovery: auto`: each lost task is down for min(its member's return, its
    place in a survivor's restore queue), within 20%, plus detecting the loss (here at once) and one
    batch (a tick). A survivor's restores share its throughput, so the survivors restore the lost
    member's tasks side by side, each its share of them one after another: the last ends after
    as many restores as a survivor takes tasks."""
    scenario = load_scenario(SCENARIOS / f"{kind}-{size}-state.yaml").with_protocol("streamapp")
    event = scenario.events[0]
    work = scenario.workload
    back = event.restart_after if event.restart_after is not None else float("inf")
    log_end = work.state_records + work.input_rate * event.at  # the changelog when the member is lost
    held = scenario.partitions // scenario.members
    per_survivor = -(-held // (scenario.members - 1))
    restore = per_survivor * log_end / work.restore_rate
    result = simulate(scenario)[0]
    assert result.max_task_downtime_seconds <= 1.2 * min(back, restore) + scenario.tick


def test_a_flapping_member_costs_two_bounces_then_nothing() -> None:
    """A member back 40 s after each of five losses eight minutes apart, its tasks 100 s from a
    restore elsewhere: each of the first two losses waits for it (40 s a task); from the second on it
    is damped, its tasks hand off to the others while it is up — the three survivors restore its
    twelve, four each one after another, before the next loss — and later losses cost nothing. It
    takes tasks again once up for the window, and the app ends balanced (before: 40 s a task at every
    loss)."""
    scenario = load_scenario(SCENARIOS / "flapping-large-state.yaml").with_protocol("streamapp")
    result, _ = simulate(scenario)
    held = scenario.partitions // scenario.members
    assert result.task_downtime_seconds <= 2 * held * 40 + 5
    assert result.max_task_downtime_seconds <= 2 * 40 + 2
    assert result.converged and result.double_ownership_violations == 0


@pytest.mark.parametrize(
    ("scenario", "minutes"), [("rolling-restart-large-state", 8), ("rolling-restart-slow-restore", 10)]
)
def test_a_rolling_restart_of_large_state_is_balanced_again_within_minutes(
    scenario: str, minutes: int
) -> None:
    """4 members whose tasks restore in ~100 s (~125 s), 40-s restarts. Handing a member off means
    restoring its six tasks on the other three, ~200 s (~250 s) — five times its restart — so `auto`
    restarts each in place from its claim: balanced again within 8 (10) minutes, each task waiting one
    restart, no more than under the better baseline (5 task-s, 2 s a task)."""
    result = run(scenario, "streamapp")
    best = min((run(scenario, p) for p in ("eager", "cooperative")), key=lambda r: r.task_downtime_seconds)
    assert result.in_place_restarts == 4 and result.converged
    assert result.time_to_balance_seconds is not None
    assert result.time_to_balance_seconds <= minutes * 60
    assert result.task_downtime_seconds <= best.task_downtime_seconds + 5
    assert result.max_task_downtime_seconds <= best.max_task_downtime_seconds + 2
    assert result.blocking_restore_records == 0


@pytest.mark.parametrize("scenario", ["rolling-restart-large-state", "rolling-restart-slow-restore"])
def test_a_handoff_rollout_of_large_state_restores_each_task_once_and_stands_none_still(
    scenario: str,
) -> None:
    """The same rolled with `strategy: handoff`: nothing stands still, each member back from its
    restart takes its tasks back from its claim (a replay of what it missed, not a restore), and copies
    of the next member's tasks warm ahead — on the member handing off now while its own tasks warm
    elsewhere, on the others while it restarts — so each handoff is ready when its turn comes. A
    member's restores share its throughput, so no such rollout is quicker than each member's share of
    the restores — every task restored once on another member: 24 restores over 4 members — plus its
    own restart, during which it restores nothing: 640 s (790 s). Balanced within 1.2 times that of the
    rollout's start: 768 s (948 s)."""
    result = simulate(handing_off(scenario))[0]
    loaded = load_scenario(SCENARIOS / f"{scenario}.yaml")
    work = loaded.workload
    assert result.task_downtime_seconds == 0 and result.blocking_restore_records == 0
    assert result.converged and result.time_to_balance_seconds is not None
    restore = work.state_records / work.restore_rate
    fastest = (loaded.partitions * restore + loaded.members * work.pod_start_seconds) / loaded.members
    assert result.time_to_balance_seconds <= 1.2 * fastest
    assert result.background_restore_records < 25 * work.state_records, (
        "one full restore per task, plus deltas"
    )


def test_stuck_members_are_replaced_one_at_a_time_once_their_round_outlasts_the_batch_timeout() -> None:
    """Two of four members' batch rounds hang at 60 s while their pods stay ready; batchTimeout 2m,
    one member unavailable at a time. Both are replaced — not before the timeout, and the second only
    once the first is back — and their tasks are processed again; every protocol does the same
    replacements, streamapp restoring the second's tasks elsewhere instead of waiting a pod start."""
    scenario = load_scenario(SCENARIOS / "stuck-members.yaml")
    results = {p: simulate(scenario.with_protocol(p))[0] for p in ("eager", "cooperative", "streamapp")}
    for result in results.values():
        assert result.stuck_replacements == 2
        assert result.converged and result.double_ownership_violations == 0
    timeout, pod_start = 120, 40
    cooperative, streamapp = results["cooperative"], results["streamapp"]
    assert cooperative.max_task_downtime_seconds >= timeout + 2 * pod_start, "one at a time"
    assert streamapp.max_task_downtime_seconds < cooperative.max_task_downtime_seconds
    assert streamapp.task_downtime_seconds < min(
        r.task_downtime_seconds for p, r in results.items() if p != "streamapp"
    )


@pytest.mark.parametrize("at", [0, 5])
def test_a_move_in_the_first_tick_is_a_handoff_like_any_later_one(at: int) -> None:
    """The app ran before time 0, so a task moved by an action at t=0 waits the handoff as one moved
    later does (it used to move for free: nothing had processed it yet in the simulation)."""
    doc = {
        "name": "scale-in",
        "partitions": 4,
        "members": 2,
        "duration": 30,
        "workload": {
            "localState": "claim",
            "inputRate": 10,
            "processRate": 70,
            "restoreRate": 250_000,
            "stateRecords": 33_000,
            "reassignSeconds": 4,
        },
        "rebalance": {"protocol": "eager"},
        "events": [{"at": at, "scale": 1}],
    }
    result, _ = simulate(parse_scenario(doc))
    assert result.task_movements == 2
    # each moved task: the handoff's 4 s and a fraction of a second for its restore and first batch
    assert 4 <= result.max_task_downtime_seconds < 5
    assert 8 <= result.task_downtime_seconds < 10
