"""A discrete-event simulator that drives the real rebalance engine with simulated executors."""
