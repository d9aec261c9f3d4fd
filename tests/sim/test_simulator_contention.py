"""The simulator with and without CPU contention (`workload.contention`) and pod starts by kind: the
keys parse strictly, the model off changes nothing, and on it slows batches where real ones slowed."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from streamapp.sim.contention import Contention, FreshMember
from streamapp.sim.scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from streamapp.sim.simulator import Simulation, simulate

SCENARIOS = Path(__file__).parents[2] / "bench" / "scenarios"

# What the shipped scenarios gave before the contention model existed (the simulator's JSON keys).
# Re-recorded when a member's restores came to share its restore throughput (as a real member's do):
# bounce's insurance copies restore one at a time on each survivor (background 240,000 -> 120,000
# records: two survivors restoring for the member's 30 s at 2,000 a second, whatever the number of
# copies), and scale-out's new members restore their two tasks each side by side at half the speed
# (balanced 132 -> 254 s after the scale-out, a little more tailed meanwhile: 1,314,600 -> 1,387,800).
BEFORE = {
    ("bounce", "streamapp"): {
        "task_downtime_seconds": 120.0,
        "max_task_downtime_seconds": 30.0,
        "longest_standstill_seconds": 30.0,
        "task_movements": 0,
        "blocking_restore_records": 0,
        "background_restore_records": 120000,
        "processed_records": 720000,
        "time_to_balance_seconds": 31.0,
        "generations": 2,
    },
    ("scale-out", "streamapp"): {
        "task_downtime_seconds": 0.0,
        "max_task_downtime_seconds": 0.0,
        "longest_standstill_seconds": 0.0,
        "task_movements": 6,
        "blocking_restore_records": 0,
        "background_restore_records": 1387800,
        "processed_records": 1080000,
        "time_to_balance_seconds": 254.0,
        "generations": 3,
    },
    ("rolling-restart", "cooperative"): {
        "task_downtime_seconds": 240.0,
        "max_task_downtime_seconds": 20.0,
        "longest_standstill_seconds": 20.0,
        "task_movements": 0,
        "blocking_restore_records": 0,
        "background_restore_records": 0,
        "processed_records": 2160000,
        "time_to_balance_seconds": 63.0,
        "generations": 0,
    },
}

BASE: dict[str, Any] = {
    "name": "contended",
    "partitions": 4,
    "members": 2,
    "duration": 150,
    "workload": {
        "inputRate": 10,
        "processRate": 70,
        "restoreRate": 250000,
        "stateRecords": 33000,
        "podStartSeconds": 45,
        "reassignSeconds": 2.7,
        "contention": {
            "cores": 2,
            "apps": 3,
            "cadence": 1.05,
            "stretchPerLoad": 0.03,
            "idleLoad": 0.5,
            "startingLoad": {"new": 2.0, "replaced": 4.0, "restarted": 2.0},
            "freshLoad": 1.8,
            "freshStretch": {"new": 0.5, "replaced": 0.3, "restarted": 0.01},
            "freshDecaySeconds": 45,
        },
    },
    "rebalance": {"protocol": "streamapp", "scheduledRebalanceMaxDelay": "120s"},
    "events": [{"at": 0, "scale": 3}],
}


def doc(**workload: Any) -> dict[str, Any]:
    """BASE with workload keys replaced (None: removed), the contention block's keys likewise from
    `contention` (None: no block)."""
    found = copy.deepcopy(BASE)
    contention = workload.pop("contention", {})
    for key, value in workload.items():
        if value is None:
            found["workload"].pop(key, None)
        else:
            found["workload"][key] = value
    if contention is None:
        del found["workload"]["contention"]
        return found
    for key, value in contention.items():
        if value is None:
            found["workload"]["contention"].pop(key, None)
        else:
            found["workload"]["contention"][key] = value
    return found


def test_the_contention_block_and_pod_starts_by_kind_parse_into_the_model() -> None:
    scenario = parse_scenario(
        doc(
            newPodStartSeconds=115,
            replacedPodStartSeconds=70,
            contention={"fresh": [{"member": 1, "readyBefore": 10, "start": "replaced"}]},
        )
    )
    work = scenario.workload
    assert work.pod_start("new") == 115 and work.pod_start("replaced") == 70 and work.pod_start_seconds == 45
    assert work.contention == Contention(
        cores=2,
        apps=3,
        cadence=1.05,
        stretch_per_load=0.03,
        idle_load=0.5,
        starting_load={"new": 2.0, "replaced": 4.0, "restarted": 2.0},
        fresh_load=1.8,
        fresh_stretch={"new": 0.5, "replaced": 0.3, "restarted": 0.01},
        fresh_decay_seconds=45,
        fresh=(FreshMember(1, 10.0, "replaced"),),
    )


def test_without_the_keys_there_is_no_model_and_every_pod_starts_in_pod_start_seconds() -> None:
    scenario = parse_scenario(doc(contention=None))
    assert scenario.workload.contention is None
    assert {scenario.workload.pod_start(kind) for kind in ("new", "replaced", "restarted")} == {45}


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({"contention": {"cores": None}}, "missing 'cores'"),
        ({"contention": {"cores": 0}}, "workload.contention.cores"),
        ({"contention": {"apps": 0}}, "workload.contention.apps"),
        ({"contention": {"threads": 4}}, "unknown key"),
        ({"contention": {"stretchPerLoad": -0.1}}, "workload.contention.stretchPerLoad"),
        ({"contention": {"freshDecaySeconds": 0}}, "workload.contention.freshDecaySeconds"),
        ({"contention": {"startingLoad": {"evicted": 1}}}, "workload.contention.startingLoad"),
        ({"contention": {"freshStretch": {"new": -1}}}, "workload.contention.freshStretch.new"),
        ({"contention": {"freshStretch": 0.5}}, "expected a mapping"),
        ({"contention": {"fresh": {"member": 0}}}, "expected a list"),
        ({"contention": {"fresh": [{"member": 0, "readyBefore": 5}]}}, "missing start"),
        (
            {"contention": {"fresh": [{"member": 0, "readyBefore": 5, "start": "cold"}]}},
            "start must be one of",
        ),
        ({"contention": {"fresh": [{"member": 2, "readyBefore": 5, "start": "new"}]}}, "below members"),
        (
            {
                "contention": {
                    "fresh": [
                        {"member": 0, "readyBefore": 5, "start": "new"},
                        {"member": 0, "readyBefore": 9, "start": "new"},
                    ]
                }
            },
            "each member once",
        ),
        ({"newPodStartSeconds": 0}, "workload.newPodStartSeconds"),
        ({"replacedPodStartSeconds": "slow"}, "workload.replacedPodStartSeconds"),
    ],
)
def test_contention_keys_are_checked_and_errors_name_them(changed: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(doc(**changed))


@pytest.mark.parametrize(("name", "protocol"), sorted(BEFORE))
def test_a_shipped_scenario_gives_what_it_gave_before_and_its_stall_is_its_downtime(
    name: str, protocol: str
) -> None:
    """No shipped scenario has the model: its results are those from before it existed, and the stall
    figures repeat the downtime's. A block with every default (nothing slows) changes nothing either."""
    scenario = load_scenario(SCENARIOS / f"{name}.yaml").with_protocol(protocol)  # type: ignore[arg-type]
    assert scenario.workload.contention is None
    result = simulate(scenario)[0].to_json()
    assert {key: result[key] for key in BEFORE[(name, protocol)]} == BEFORE[(name, protocol)]
    assert result["stall_seconds"] == result["task_downtime_seconds"]
    assert result["max_task_stall_seconds"] == result["max_task_downtime_seconds"]
    assert result["longest_stall_seconds"] == result["longest_standstill_seconds"]
    idle = replace(scenario, workload=replace(scenario.workload, contention=Contention(cores=2, apps=3)))
    assert simulate(idle)[0].to_json() == result


def run(found: dict[str, Any]) -> dict[str, Any]:
    return simulate(parse_scenario(found))[0].to_json()


def test_starting_pods_slow_every_task_of_every_app_and_only_the_stall_shows_it() -> None:
    """A scale-out with a new member starting for 100 s: the running tasks' batches slow down (the
    stall exceeds the downtime), more with more apps on the cores and fewer cores, while nothing the
    engine decides changes."""
    alone = run(doc(newPodStartSeconds=100, contention={"apps": 1}))
    shared = run(doc(newPodStartSeconds=100))
    crowded = run(doc(newPodStartSeconds=100, contention={"cores": 1}))
    assert alone["stall_seconds"] > alone["task_downtime_seconds"]
    assert alone["stall_seconds"] < shared["stall_seconds"] < crowded["stall_seconds"]
    for key in ("task_downtime_seconds", "task_movements", "generations", "processed_records"):
        assert alone[key] == shared[key] == crowded[key]


def test_a_new_member_starts_in_new_pod_start_seconds_and_slows_the_cores_while_it_does() -> None:
    """`newPodStartSeconds` is how long the scale-out's pod takes (`podStartSeconds` still the
    operator's estimate); a longer start keeps the cores busier for longer."""
    quick = Simulation(parse_scenario(doc(newPodStartSeconds=20)))
    quick.run()
    slow = Simulation(parse_scenario(doc(newPodStartSeconds=100)))
    slow.run()
    assert quick.executors[2].started_at == 20 and slow.executors[2].started_at == 100
    assert quick.executors[2].start_kind == slow.executors[2].start_kind == "new"
    assert slow.stall.total() > quick.stall.total()


def test_pods_start_as_their_events_say() -> None:
    """A kill with `restartAfter` restarts the container; a rollout replaces the pod, in
    `replacedPodStartSeconds`."""
    killed = doc() | {"events": [{"at": 0, "kill": 0, "restartAfter": 30}]}
    rolled = doc(replacedPodStartSeconds=60) | {"events": [{"at": 0, "rollingRestart": True}]}
    restarted = Simulation(parse_scenario(killed))
    restarted.run()
    replaced = Simulation(parse_scenario(rolled))
    replaced.run()
    assert restarted.executors[0].start_kind == "restarted" and restarted.executors[0].started_at == 30
    assert {e.start_kind for e in replaced.executors.values()} == {"replaced"}
    assert all(e.started_at >= 60 for e in replaced.executors.values())


def test_a_member_fresh_at_time_0_slows_its_own_tasks_most() -> None:
    """A scenario that begins 5 s after member 1 was replaced: its tasks stall more than member 0's,
    and the app more than with both warm."""
    fresh = [{"member": 1, "readyBefore": 5, "start": "replaced"}]
    quiet: dict[str, Any] = {"events": []}
    warm = Simulation(parse_scenario(doc() | quiet))
    warm.run()
    started = Simulation(parse_scenario(doc(contention={"fresh": fresh}) | quiet))
    started.run()
    mine = [t for t, state in enumerate(started.assignment.tasks) if state.active == 1]
    theirs = [t for t, state in enumerate(started.assignment.tasks) if state.active == 0]
    assert mine and theirs
    assert min(started.stall.per_task[t] for t in mine) > max(started.stall.per_task[t] for t in theirs)
    assert started.stall.total() > warm.stall.total()


def test_the_calibrated_cluster_scenarios_parse_and_carry_the_model() -> None:
    """`bench/cluster.py --report` writes them from run 1: each parses, with the model of three apps
    on the cores."""
    paths = sorted((SCENARIOS / "calibrated").glob("*.yaml"))
    assert paths
    for path in paths:
        scenario: Scenario = load_scenario(path)
        assert scenario.workload.contention is not None, path
        assert yaml.safe_load(path.read_text())["workload"]["contention"]["apps"] == 3
