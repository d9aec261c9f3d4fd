"""Prometheus's `promtool`, built once from the Go module proxy: it checks the shipped alerting rules and
runs their unit tests (`tests/api/test_alerts.py`)."""
