"""StreamApp Operator: stateful PySpark stream processing on Kubernetes with cooperative rebalancing."""

__version__ = "0.1.0"
