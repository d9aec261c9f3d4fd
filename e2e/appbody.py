"""The one StreamApp body builder of the tests, the benchmarks and e2e: the counting sample on a file log."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def app_body(
    name: str = "counts",
    *,
    namespace: str | None = "ns",
    uid: str | None = "u1",
    generation: int | None = None,
    replicas: int = 1,
    partitions: int = 4,
    state_store: str | Mapping[str, Any] = "file:///data/state",
    source: str = "/data/input",
    sink: str | None = None,
    pipeline: Mapping[str, Any] | None = None,
    executor: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A StreamApp body of the counting sample on a file log at `source` (outputs to files at `sink`,
    when given): `pipeline` and `executor` are merged over the pipeline and an image, `state_store` is
    a URI or the whole block, `spec` adds or replaces top-level spec keys. The one builder the tests,
    benchmarks and e2e share, so a field the model starts to require is added here once."""
    metadata: dict[str, Any] = {"name": name}
    for key, value in (("namespace", namespace), ("uid", uid), ("generation", generation)):
        if value is not None:
            metadata[key] = value
    return {
        "apiVersion": "streamapp.dev/v1alpha1",
        "kind": "StreamApp",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "partitions": partitions,
            "pipeline": {
                "transform": "streamapp.executor.samples.counts:counts",
                "source": {"type": "file", "path": source},
                **({"sink": {"type": "file", "path": sink}} if sink is not None else {}),
                "stateStore": {"uri": state_store} if isinstance(state_store, str) else dict(state_store),
                **(pipeline or {}),
            },
            "executor": {"image": "img", **(executor or {})},
            **spec,
        },
    }
