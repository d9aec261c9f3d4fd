"""How bench/apiscale.py splits the operator's steady CPU between reconciles and reports, and the
machine's between the operator and its neighbours."""

from __future__ import annotations

import os

from apiscale import PLAYER, Phase, Reconciles, cost_per_report, where_the_cores_went


def steady(name: str, reconciles: float, reports: float, per_reconcile: float, per_report: float) -> Phase:
    """A 100-s phase whose CPU is exactly what the given costs make of the given rates."""
    cpu = 100 * (reconciles * per_reconcile + reports * per_report)
    return Phase(
        name, 100.0, cpu, 600.0, int(100 * reports), 0, 0, "reports only", Reconciles(100 * reconciles)
    )


def test_the_costs_of_a_reconcile_and_of_a_report_are_recovered_from_two_mixes() -> None:
    phases = [
        steady("steady", 0.6, 20.0, 0.25, 0.004),
        steady("steady, half the rate", 0.8, 10.0, 0.25, 0.004),
    ]
    [line] = cost_per_report(phases, asked=100.0)
    assert "250 ms of CPU a reconcile and 4.0 ms a report" in line
    assert "that is 0.65 of a core" in line


def test_alike_mixes_or_a_negative_cost_extrapolate_nothing() -> None:
    alike = [
        steady("steady", 0.5, 20.0, 0.25, 0.004),
        steady("steady, half the rate", 0.5, 20.5, 0.25, 0.004),
    ]
    assert "too alike" in cost_per_report(alike, 100.0)[0]
    noisy = [steady("steady", 0.6, 20.0, 0.25, 0.004), steady("steady, half the rate", 0.8, 10.0, 0.3, 0.0)]
    noisy[1].cpu_s = 5.0  # less CPU at more reconciles and fewer reports: no positive split exists
    assert "negative" in cost_per_report(noisy, 100.0)[0]


def test_the_machine_s_cpu_is_split_between_the_operator_its_neighbours_and_the_rest() -> None:
    phase = steady("steady", 0.6, 20.0, 0.25, 0.004)  # the operator: 0.23 of a core over 100 s
    phase.neighbours = {"kube-apiserver": 80.0, "etcd": 30.0, PLAYER: 40.0, "machine": 190.0}
    header, row = where_the_cores_went([phase])[2], where_the_cores_went([phase])[4]
    assert header.startswith("| phase | operator | kube-apiserver | etcd | this process")
    cells = [c.strip() for c in row.strip("|").split("|")]
    cores = os.cpu_count() or 1
    assert cells[:5] == ["steady", "0.23", "0.80", "0.30", "0.40"]
    assert cells[5] == "0.17"  # 1.90 busy less 0.23 + 0.80 + 0.30 + 0.40
    assert cells[6] == f"{max(cores - 1.9, 0.0):.2f}"
