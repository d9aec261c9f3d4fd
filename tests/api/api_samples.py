"""Resource bodies shared by the tests: the minimal app of the api tests, and the one builder (`appbody`) parsed."""

from __future__ import annotations

import copy
from typing import Any

from appbody import app_body
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


def app_with_pipeline(**pipeline: Any) -> dict[str, Any]:
    """MINIMAL_APP with a pipeline of a file source at /x and a state store at file:///s, `pipeline`
    keys replaced."""
    return app(
        pipeline={
            "transform": "m:f",
            "source": {"type": "file", "path": "/x"},
            "stateStore": {"uri": "file:///s"},
            **pipeline,
        }
    )


def app_model(name: str = "counts", **options: Any) -> StreamApp:
    """`app_body(name, **options)` parsed, as the operator reads it."""
    return StreamApp.from_resource(app_body(name, **options))
