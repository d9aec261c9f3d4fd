"""The rebalance benchmark on the local cluster with real executors (`bench/cluster.py`)."""
