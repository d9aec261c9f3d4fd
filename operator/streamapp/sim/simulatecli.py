"""`streamapp simulate SCENARIO.yaml [--protocol P]... [--autoscaler A] [--seed N] [--json] [--plot FILE.png]`."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from typing import Any

from streamapp.rebalance import PROTOCOLS, Protocol
from streamapp.sim.report import plot, table
from streamapp.sim.scalers import AUTOSCALERS
from streamapp.sim.scenario import ScenarioError, load_scenario
from streamapp.sim.simulator import simulate


def register(subparsers: Any) -> None:
    """Add the `simulate` subcommand."""
    parser = subparsers.add_parser(
        "simulate",
        help="run the rebalance engine against simulated executors",
        description="Run a scenario under one or more protocols and compare them side by side.",
    )
    parser.add_argument("scenario", help="scenario YAML file (see bench/scenarios/)")
    parser.add_argument(
        "--protocol",
        action="append",
        choices=PROTOCOLS,
        help="protocol to run (repeat for a side-by-side comparison; default: the scenario's own)",
    )
    parser.add_argument(
        "--autoscaler",
        choices=AUTOSCALERS,
        help="who sets the replicas: none (the scenario's scale events), streamapp (the operator's "
        "autoscaler, the scenario's autoscaling block) or keda-hpa (its keda block); default: the scenario's",
    )
    parser.add_argument(
        "--seed", type=int, help="draw the trace's noise from this seed (default: the scenario's)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per protocol, one per line"
    )
    parser.add_argument("--plot", metavar="FILE.png", help="write a timeline plot of all runs")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the scenario once per protocol; print a table or JSON lines."""
    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as error:
        print(f"streamapp simulate: {error}", file=sys.stderr)
        return 2
    if args.plot and importlib.util.find_spec("matplotlib") is None:  # before minutes of simulation
        print(
            "streamapp simulate: --plot needs matplotlib; pip install 'streamapp-operator[plots]'",
            file=sys.stderr,
        )
        return 2
    try:
        if args.autoscaler is not None:
            scenario = scenario.with_autoscaler(args.autoscaler)
    except ScenarioError as error:
        print(f"streamapp simulate: {error}", file=sys.stderr)
        return 2
    if args.seed is not None:
        scenario = scenario.with_seed(args.seed)
    protocols: list[Protocol] = args.protocol or [scenario.rebalance.protocol]
    runs = []
    for protocol in dict.fromkeys(protocols):
        if not args.json:
            print(f"simulating {scenario.name} under {protocol} …", file=sys.stderr, flush=True)
        runs.append(simulate(scenario.with_protocol(protocol)))
    if args.json:
        for result, _ in runs:
            print(json.dumps(result.to_json(), sort_keys=False))
    else:
        print(table([result for result, _ in runs]))
    if args.plot:
        path = plot(runs, args.plot, [e.at for e in scenario.events])
        print(f"timeline plot written to {path}", file=sys.stderr)
    return 0
