"""The warmup-budget and copy-churn figures of docs/design.md, one JSON line each.

Runs the simulator under `streamapp` on the 900-task headline reduced to its scale-out (to one new
member with two budgets, and to three new members), on the full headline with and without a standby
per task, and on the bounce scenario. `PYTHONPATH=<other checkout>/operator` measures another version.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from streamapp.sim.scenario import Scenario, load_scenario
from streamapp.sim.simulator import simulate

SCENARIOS = Path(__file__).parent / "scenarios"


def runs() -> list[tuple[str, Scenario]]:
    """(label, scenario) of every run docs/design.md draws figures from."""
    headline = load_scenario(SCENARIOS / "headline-900.yaml").with_protocol("streamapp")
    scale_out = replace(headline, events=headline.events[:1], duration=3000)

    def budget(scenario: Scenario, warmups: int) -> Scenario:
        return replace(scenario, rebalance=replace(scenario.rebalance, max_warmup_replicas=warmups))

    to_six = replace(scale_out, events=(replace(headline.events[0], scale=6),))
    standby = replace(headline, rebalance=replace(headline.rebalance, standby_replicas=1))
    return [
        ("headline scale-out 3->4, maxWarmupReplicas 2", budget(scale_out, 2)),
        ("headline scale-out 3->4, maxWarmupReplicas 32", budget(scale_out, 32)),
        ("900 tasks scale-out 3->6, maxWarmupReplicas 32", budget(to_six, 32)),
        ("headline-900, standbyReplicas 0", headline),
        ("headline-900, standbyReplicas 1", standby),
        ("bounce", load_scenario(SCENARIOS / "bounce.yaml").with_protocol("streamapp")),
    ]


def main() -> None:
    for label, scenario in runs():
        result, _ = simulate(scenario)
        print(json.dumps({"run": label, **result.to_json()}), flush=True)


if __name__ == "__main__":
    main()
