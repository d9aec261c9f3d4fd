"""Chaos on the real control plane with real executors.

A scenario (:mod:`chaos.scenario`) runs a count app whose members are real PySpark executors on the
process node, feeds it continuous input, scales it out and in, and injects seeded random faults
(:mod:`chaos.faults`): executors SIGKILLed, the leading operator SIGKILLed mid-rebalance or paused,
the kube-apiserver restarted. An observer (:mod:`chaos.observer`) checks from the outside, while it
runs, that no task is active on two members and that epochs never go backwards; afterwards the
scenario checks output exactly once and convergence, and :mod:`chaos.report` writes the figures.
Shared by tests/integration/test_chaos.py (short variant) and `make chaos` (long variant).
"""
