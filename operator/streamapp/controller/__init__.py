"""The kopf operator: thin shells around the pure rebalance engine (docs/design.md, "Architecture")."""
