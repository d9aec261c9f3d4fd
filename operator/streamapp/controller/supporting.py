"""The app's supporting children — headless Service, PodDisruptionBudget, each member's ServiceAccount,
Role and RoleBinding (or the one all members share: `serviceAccountScope: app`) — brought back to
what they should be on every pass (level-triggered).

They are watched like the pods, so one deleted or altered by hand wakes the app and is repaired:
without its Role an executor cannot read its target, without the PDB a drain may take every member
at once. `repairs` is the pure diff; `enact.repairs` performs it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from streamapp.api.names import MANAGED_ANNOTATIONS, MEMBER_LABEL, SHARED_IDENTITY_LABEL
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children

Body = Mapping[str, Any]
IDENTITY_KINDS = ("ServiceAccount", "Role", "RoleBinding")
# What must match for an existing object to count as intact (the rest is the API server's or the
# user's business: annotations, extra labels, defaulted fields); dotted paths reach into a field.
_CONTENT = {
    "Role": ("rules",),
    "RoleBinding": ("roleRef", "subjects"),
    "PodDisruptionBudget": ("spec.maxUnavailable",),
}


@dataclass(frozen=True)
class Repair:
    """One write: create a missing object, patch a drifted Role or PDB or a ServiceAccount's annotations,
    or delete a stale object (a RoleBinding's roleRef cannot change in place; the next pass creates it
    anew)."""

    action: Literal["create", "patch", "delete"]
    kind: str
    name: str
    body: Body
    uid: str = ""
    """The UID of the object a patch or delete is for (the one observed): the write applies to it only."""


def wanted(app: StreamApp, members: Iterable[int]) -> list[dict[str, Any]]:
    """Everything the app needs for `members` (those wanted, holding tasks, or with a pod)."""
    bodies = [children.headless_service(app), children.disruption_budget(app)]
    if app.spec.executor.service_account_scope == "app":
        members = set(members)  # none: no identity (a Role naming no member would reach every one)
        return bodies + (children.shared_executor_identity(app, members) if members else [])
    for member in sorted(set(members)):
        bodies.extend(children.executor_identity(app, member))
    return bodies


def repairs(want: Sequence[Body], observed: Iterable[Body]) -> list[Repair]:
    """What to write so that the observed children become `want`; identities of members no longer
    wanted are deleted."""
    seen = {(o["kind"], o["metadata"]["name"]): o for o in observed}
    fixes: list[Repair] = []
    for body in want:
        key = (body["kind"], body["metadata"]["name"])
        current = seen.pop(key, None)
        if current is None:
            fixes.append(Repair("create", *key, body))
        elif key[0] == "ServiceAccount":
            patch = annotation_patch(current, body)
            if patch:
                fixes.append(Repair("patch", *key, {"metadata": {"annotations": patch}}, _uid(current)))
        elif any(_at(current, path) != _at(body, path) for path in _CONTENT.get(key[0], ())):
            action: Literal["patch", "delete"] = "delete" if key[0] == "RoleBinding" else "patch"
            fixes.append(Repair(action, *key, body, _uid(current)))
    for (kind, name), body in sorted(seen.items()):
        labels = (body.get("metadata") or {}).get("labels") or {}
        if kind in IDENTITY_KINDS and (MEMBER_LABEL in labels or SHARED_IDENTITY_LABEL in labels):
            fixes.append(Repair("delete", kind, name, body, _uid(body)))
    return fixes


def _uid(body: Body) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")


def annotation_patch(current: Body, want: Body) -> dict[str, str | None]:
    """The merge patch that gives a ServiceAccount the annotations the spec asks for and removes those
    the operator set before that the spec no longer names (`MANAGED_ANNOTATIONS` lists them); empty
    when it has them already. Annotations anyone else set are left alone."""
    have = dict(_at(current, "metadata.annotations") or {})
    wanted = dict(_at(want, "metadata.annotations") or {})
    ours = {key for key in str(have.get(MANAGED_ANNOTATIONS, "")).split(",") if key}
    if MANAGED_ANNOTATIONS in have:
        ours.add(MANAGED_ANNOTATIONS)
    patch: dict[str, str | None] = {key: value for key, value in wanted.items() if have.get(key) != value}
    patch.update(dict.fromkeys(sorted(key for key in ours - wanted.keys() if key in have)))
    return patch


def _at(body: Body, path: str) -> Any:
    """The value at a dotted path (None where a step is missing)."""
    value: Any = body
    for step in path.split("."):
        value = value.get(step) if isinstance(value, Mapping) else None
    return value
