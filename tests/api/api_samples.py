"""Resource bodies shared by the tests: the one StreamApp builder, and the minimal app of the api tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from streamapp.api.streamapp import StreamApp

MINIMAL_APP: dict[str, Any] = {
    "apiVersion": "streamapp.dev/v1alpha1",
    "kind": "StreamApp",
    "metadata": {"name": "counts"},
    "spec": {
        "partitions": 12,
        "pipeline": {
            "transform": "streamapp.executor.samples.counts:counts",
            "source": {"type": "file", "path": "/data/in"},
            "stateStore": {"uri": "file:///data/state"},
        },
        "executor": {"image": "streamapp:0.1.0"},
    },
}


def app(**spec: Any) -> dict[str, Any]:
    """MINIMAL_APP with top-level spec keys replaced."""
    body = copy.deepcopy(MINIMAL_APP)
    body["spec"].update(spec)
    return body


def app_with_rebalance(**rebalance: Any) -> dict[str, Any]:
    """MINIMAL_APP with a rebalance block."""
    return app(rebalance=rebalance)


def app_body(
    name: str = "counts",
    *,
    namespace: str | None = "ns",
    uid: str | None = "u1",
    generation: int | None = None,
    replicas: int = 1,
    partitions: int = 4,
    state_store: str | Mapping[str, Any] = "file:///data/state",
    executor: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A StreamApp body of the counting sample on a file log: `executor` is merged over an image,
    `state_store` is a URI or the whole block, `spec` adds or replaces top-level spec keys. The one builder the tests share, so a field the model
    starts to require is added here once."""
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
                "source": {"type": "file", "path": "/data/input"},
                "stateStore": {"uri": state_store} if isinstance(state_store, str) else dict(state_store),
            },
            "executor": {"image": "img", **(executor or {})},
            **spec,
        },
    }


def app_model(name: str = "counts", **options: Any) -> StreamApp:
    """`app_body(name, **options)` parsed, as the operator reads it."""
    return StreamApp.from_resource(app_body(name, **options))
