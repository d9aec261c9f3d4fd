"""The kopf operator: thin shells around the pure rebalance engine (DESIGN.md §3)."""
