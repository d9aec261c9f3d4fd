"""The process's own Prometheus metrics (memory, CPU, open files, Python's GC and version).

The operator and each executor keep their metrics on a registry of their own (tests make as many as
they like), and such a registry has none of these unless they are registered on it: both serve them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector


def register_process_metrics(registry: CollectorRegistry) -> None:
    """Add the process, platform and GC collectors to `registry`."""
    for collector in (ProcessCollector, PlatformCollector, GCCollector):
        collector(registry=registry)
