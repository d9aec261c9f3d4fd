"""Which claims a pod template may mount: none that is another app's, member's or controller's (pure).

Whether the app's author may read a claim is checked when the app is applied (`render.referencepolicy`):
only the API server knows who asks. The operator reconciles later and cannot tell who wrote the app
— under GitOps every app is the GitOps controller's — so it re-checks what it can judge from the
claim itself, which holds for any author: a claim that belongs to something else holds that
thing's data, and mounting it in this app's pods hands the data to this app's code. So a claim the
template mounts (`volumes[].persistentVolumeClaim.claimName`) is refused when

- it has a controller ownerReference: another StreamApp's member state, this app's own member state
  (each member mounts only its own, as the operator's `state` volume), another pod's ephemeral
  volume, a StatefulSet's;
- it carries a StreamApp member's labels (a member's claim whose owner reference was removed, e.g.
  left behind by an orphaning delete);
- it does not exist yet and is named as the operator names state claims (`<app>-state-<id>`): the
  pod would wait for it and then mount the claim a member of that app is given.

Secrets and ConfigMaps have no such marks the operator could read without rights it must not hold
(reading Secrets), so they are the admission policy's alone. A refused app gets Degraded with
reason `ClaimRefused` and a Warning Event naming the field; no pod of it is created or replaced.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from streamapp.api.names import APP_LABEL
from streamapp.api.streamapp import DNS_1035_LABEL, StreamApp

Body = Mapping[str, Any]
VOLUMES_PATH = "spec.executor.podTemplate.spec.volumes"
STATE_CLAIM_PATTERN = re.compile(DNS_1035_LABEL.rstrip("$") + r"-state-[0-9]+$")


def mounted_claims(app: StreamApp) -> list[tuple[str, str]]:
    """(field path, claim name) of every claim the app's pod template mounts."""
    spec = (app.spec.executor.pod_template or {}).get("spec") or {}
    out = []
    for index, volume in enumerate(spec.get("volumes") or []):
        source = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        name = source.get("claimName") if isinstance(source, Mapping) else None
        if isinstance(name, str) and name:
            out.append((f"{VOLUMES_PATH}[{index}].persistentVolumeClaim.claimName", name))
    return out


def violations(app: StreamApp, claims: Mapping[str, Body | None]) -> Iterator[tuple[str, str]]:
    """(field path, why) for each mounted claim that is not free to mount; `claims` holds each mounted
    claim as read (None: it does not exist)."""
    for path, name in mounted_claims(app):
        claim = claims.get(name)
        if claim is None:
            if STATE_CLAIM_PATTERN.match(name):
                yield (
                    path,
                    (
                        f"claim {name} does not exist and is named as the operator names a member's state "
                        "claim (<app>-state-<id>): once created for that member, this app's pods would mount it"
                    ),
                )
            continue
        meta = claim.get("metadata") or {}
        owner = next((ref for ref in meta.get("ownerReferences") or [] if ref.get("controller")), None)
        if owner is not None:
            what = (
                f"the state of a member of StreamApp {owner.get('name')}"
                if owner.get("kind") == StreamApp.KIND
                else f"controlled by {owner.get('kind')} {owner.get('name')}"
            )
            yield path, f"claim {name} is {what}"
        elif APP_LABEL in (meta.get("labels") or {}):
            yield path, f"claim {name} carries the labels of StreamApp {meta['labels'][APP_LABEL]}'s members"


def refusal(app: StreamApp, claims: Mapping[str, Body | None]) -> str | None:
    """Why the app's pods may not be made, naming the field, or None."""
    for path, why in violations(app, claims):
        return (
            f"{path}: {why}; the operator mounts no claim that belongs to another app, member or "
            "controller (its data is theirs)"
        )
    return None
