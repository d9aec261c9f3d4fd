"""Resource bodies shared by the api tests."""

from __future__ import annotations

import copy
from typing import Any

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
