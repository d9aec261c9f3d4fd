"""A pod template's labels and annotations go onto every member pod: the operator's own keys are
refused (on every install), each refusal naming the key; anyone else's keys are the author's."""

from __future__ import annotations

from typing import Any

import pytest
from api_samples import app_model

from streamapp.api.fields import ValidationError
from streamapp.api.streamapp import StreamApp
from streamapp.controller.admission import admit_metadata, reserved_keys

RESERVED = [
    ("labels", "streamapp.dev/app"),
    ("labels", "streamapp.dev/member"),
    ("labels", "streamapp.dev/pod-template-hash"),
    ("labels", "app.kubernetes.io/managed-by"),
    ("labels", "x.streamapp.dev/anything"),
    ("annotations", "streamapp.dev/operator-restart"),
    ("annotations", "streamapp.dev/handoff-started"),
]
ALLOWED = {
    "labels": {"team": "a", "app.kubernetes.io/name": "counts", "streamapp.dev.example/x": "y"},
    "annotations": {"prometheus.io/scrape": "true", "notstreamapp.dev/x": "y"},
}


def app(template: dict[str, Any]) -> StreamApp:
    return app_model(partitions=1, executor={"podTemplate": template})


@pytest.mark.parametrize(("field", "key"), RESERVED)
def test_the_operators_keys_are_refused_naming_the_key(field: str, key: str) -> None:
    template = {"metadata": {field: {**ALLOWED[field], key: "true"}}}
    assert list(reserved_keys(template)) == [
        (
            f"spec.executor.podTemplate.metadata.{field}[{key}]",
            f"the key {key} is reserved for the operator (its own {field})",
        )
    ]
    with pytest.raises(ValidationError, match=key):
        admit_metadata(app(template))


def test_other_keys_are_the_authors() -> None:
    assert not list(reserved_keys({"metadata": ALLOWED}))
    admit_metadata(app({"metadata": ALLOWED}))
