"""Chaos on the real control plane with real executors (e2e/chaos).

A count app of real PySpark executors on the process node takes continuous input while it is scaled
2 → 3 → 2 and hit by seeded random faults: executors SIGKILLed, the leading operator (of two
leader-electing replicas) SIGKILLed mid-rebalance or paused past its lease, the kube-apiserver
restarted. An outside observer checks throughout that no task is active on two members and that
epochs never go backwards; afterwards output must be exactly once and the app converged.

The short variant runs in every `make test`; `make chaos` sets STREAMAPP_CHAOS=long for the long one,
which writes bench/results/chaos.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kubernetes import client, config
from operator_support import Operators

from chaos import report
from chaos.scenario import ChaosConfig, Environment, run
from localcluster.controlplane import LocalCluster

# API-server restarts: one in the short run, two per 10 minutes in the long one, unless set.
APISERVER_RESTARTS = os.environ.get("STREAMAPP_CHAOS_APISERVER_RESTARTS")
RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "chaos.md"

SHORT = ChaosConfig(
    duration_s=100,
    seed=10,
    executor_kills=3,
    operator_kills=2,
    leader_pauses=2,
    apiserver_restarts=int(APISERVER_RESTARTS or 1),
)
LONG_S = float(os.environ.get("STREAMAPP_CHAOS_SECONDS", "600"))
LONG = ChaosConfig(  # per 10 minutes: 15 executor kills, 5 leader kills, 4 leader pauses
    duration_s=LONG_S,
    seed=int(os.environ.get("STREAMAPP_CHAOS_SEED", "11")),
    executor_kills=max(1, round(15 * LONG_S / 600)),
    operator_kills=max(2, round(5 * LONG_S / 600)),
    leader_pauses=max(1, round(4 * LONG_S / 600)),
    apiserver_restarts=int(APISERVER_RESTARTS or max(1, round(2 * LONG_S / 600))),
)
LONG_RUN = os.environ.get("STREAMAPP_CHAOS") == "long"


@pytest.mark.slow
@pytest.mark.timeout(3600 if LONG_RUN else 1500)
def test_chaos_keeps_one_owner_monotonic_epochs_and_output_exactly_once(
    local_cluster: LocalCluster | None,
    api_client: client.ApiClient,
    kubeconfig_path: Path,
    namespace: str,
    operators: Operators,
    process_node: str,
    tmp_path: Path,
) -> None:
    if local_cluster is None:
        pytest.skip("the faults act on the local control plane's processes")
    load_before = os.getloadavg()
    observer_api = config.new_client_from_config(config_file=str(kubeconfig_path))
    workdir = tmp_path / "app"
    workdir.mkdir()
    env = Environment(api_client, observer_api, namespace, local_cluster, operators.start, workdir)
    try:
        outcome = run(env, LONG if LONG_RUN else SHORT)
    finally:
        observer_api.close()
    if LONG_RUN:
        variant = f"long ({LONG.duration_s / 60:.0f} min)"
        RESULTS.write_text(report.render(outcome, report.machine(load_before), variant))
    assert outcome.tally.violations == [], "\n".join([*outcome.tally.violations, *outcome.tally.evidence])
    assert outcome.tally.polls > 0 and outcome.tally.manifests_accepted > 0
    assert outcome.injected, outcome.log
