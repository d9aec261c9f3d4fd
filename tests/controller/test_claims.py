"""The operator's own check of the claims a pod template mounts (controller/claims.py): whoever wrote
the app, no pod of it mounts a claim that is another app's, one of its own members', or any
controller's, nor one not yet created that is named as a member's state claim."""

from __future__ import annotations

from typing import Any

import pytest
from test_admission import app_with

from streamapp.api.names import member_labels
from streamapp.controller.claims import refusal, violations

FIELD = "spec.executor.podTemplate.spec.volumes[1].persistentVolumeClaim.claimName"


def mounting(claim: str) -> Any:
    return app_with(
        {
            "volumes": [
                {"name": "cache", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
            ]
        }
    )


def claim(
    name: str, owner: dict[str, Any] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"controller": True, "uid": "u", **owner}]
    return {"metadata": meta}


APP_OWNER = {"apiVersion": "streamapp.dev/v1alpha1", "kind": "StreamApp", "name": "other"}


@pytest.mark.parametrize(
    ("name", "found", "said"),
    [
        ("other-state-0", claim("other-state-0", APP_OWNER), "state of a member of StreamApp other"),
        ("counts-state-1", claim("counts-state-1", {**APP_OWNER, "name": "counts"}), "StreamApp counts"),
        (
            "data-db-0",
            claim("data-db-0", {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}),
            "StatefulSet db",
        ),
        (
            "counts-0-cache",
            claim("counts-0-cache", {"apiVersion": "v1", "kind": "Pod", "name": "counts-0"}),
            "Pod counts-0",
        ),
        (
            "orphan-state-2",
            claim("orphan-state-2", labels=member_labels("orphan", 2)),
            "StreamApp orphan's members",
        ),
        ("later-state-3", None, "does not exist and is named as the operator names"),
    ],
)
def test_a_claim_of_another_app_member_or_controller_is_refused(
    name: str, found: dict[str, Any] | None, said: str
) -> None:
    app = mounting(name)
    message = refusal(app, {name: found})
    assert message is not None and message.startswith(f"{FIELD}: claim {name}") and said in message, message


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("team-data", claim("team-data")),  # the team's own claim, nobody's child
        ("team-data", None),  # not there yet: the pod waits for it
        ("shared-state-0", claim("shared-state-0", labels={"team": "a"})),  # exists and is nobody's
        (
            "team-data",
            claim("team-data", {"apiVersion": "v1", "kind": "Thing", "name": "x", "controller": False}),
        ),
    ],
)
def test_a_claim_nobody_controls_is_mounted(name: str, found: dict[str, Any] | None) -> None:
    assert refusal(mounting(name), {name: found}) is None


def test_only_mounted_claims_count() -> None:
    assert list(violations(app_with({}), {})) == []
    app = app_with({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": None}}]})
    assert list(violations(app, {})) == []
