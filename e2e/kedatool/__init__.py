"""KEDA for the autoscaling test: a trimmed build from Go modules (build.py) and its processes beside
the local cluster (run.py)."""
