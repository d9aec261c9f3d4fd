"""Nulls in a pod template mean absent (api/podtemplate.py): the API server keeps them in the template's
undeclared fields (tests/integration/test_template_inputs.py posts them raw), and merged as they were
they dropped the operator's restricted defaults and got past its checks."""

from __future__ import annotations

import re

import pytest
from test_admission import app_with

from streamapp.api import ValidationError
from streamapp.controller import children
from streamapp.controller.admission import STRICT, admit

NULLS = {
    "securityContext": {"runAsNonRoot": None, "seccompProfile": None, "fsGroup": None},
    "containers": [
        {
            "name": "executor",
            "securityContext": {"allowPrivilegeEscalation": None, "readOnlyRootFilesystem": None},
        },
        {
            "name": "side",
            "image": "i",
            "securityContext": {"allowPrivilegeEscalation": None, "capabilities": None},
        },
    ],
    "initContainers": [{"name": "init", "image": "i", "securityContext": None, "env": None}],
    "tolerations": [None],
}


def test_nulls_keep_the_operators_defaults() -> None:
    app = app_with(NULLS)
    admit(app, STRICT)
    pod = children.pod(app, 0)["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["fsGroup"] == 65532
    for container in [*pod["containers"], *pod["initContainers"]]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False, container["name"]
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], container["name"]
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["tolerations"] == []
    assert "None" not in repr(pod), "no null reaches the pod"


def test_a_null_hides_nothing_beside_it() -> None:
    app = app_with({"securityContext": {"runAsNonRoot": None, "runAsUser": 0}})
    with pytest.raises(ValidationError, match=re.escape("securityContext.runAsUser")):
        admit(app, STRICT)
