"""Which Services a pod template's labels would put the member pods behind (pure).

A Service sends its traffic to every ready pod whose labels match its selector, whoever made the pod.
A StreamApp author who may not create pods could still, through `podTemplate.metadata.labels`, give
the member pods a label another team's Service selects on (`app: payments`), and the operator would
create pods that receive that Service's requests — the tenant's code answering another app's callers.
Admission cannot see Services, so the operator judges it: before it creates a pod of a new revision it
reads the namespace's Services (only for a template with labels) and refuses the revision when a
Service that does not name this app (`streamapp.dev/app=<app>` in its selector) would select the pod
through the template's labels alone. A Service that selects the pod by the operator's own labels was
written to, and one that names the app was written for it: both are left alone.

Checked once per revision, against the Services that exist then: a Service created later selects what
its author chose. A refused app gets Degraded with reason `ServiceJoinRefused` and a Warning Event
naming the Service and the labels; no pod of that revision is created, running ones keep running.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamapp.api.names import APP_LABEL, MEMBER_LABEL, REVISION_LABEL, member_labels
from streamapp.api.streamapp import StreamApp

LABELS_PATH = "spec.executor.podTemplate.metadata.labels"


def template_labels(app: StreamApp) -> dict[str, str]:
    """The labels the app's pod template adds to every member pod."""
    metadata = (app.spec.executor.pod_template or {}).get("metadata") or {}
    return {str(key): str(value) for key, value in (metadata.get("labels") or {}).items()}


def joined(app: StreamApp, revision: str, selectors: Mapping[str, Mapping[str, str]]) -> str | None:
    """Why the member pods of `revision` may not be created, or None: `selectors` holds each Service of
    the app's namespace by name (an empty selector: the Service selects no pod)."""
    added = template_labels(app)
    name = str(app.metadata.name)
    found = []
    for service, selector in sorted(selectors.items()):
        if not selector or selector.get(APP_LABEL) == name:
            continue
        # The operator's labels of the member the selector names, if any (each member has its own).
        member = selector.get(MEMBER_LABEL, "0")
        if not member.isdecimal():
            continue  # no member pod carries it
        own = {**member_labels(name, 0), MEMBER_LABEL: member, REVISION_LABEL: revision}
        if _selects(selector, {**added, **own}) and not _selects(selector, own):
            used = {key: value for key, value in sorted(selector.items()) if added.get(key) == value}
            found.append(f"Service {service} (selector {_shown(selector)}) through {_shown(used)}")
    if not found:
        return None
    return (
        f"{LABELS_PATH} would put member pods behind "
        + "; ".join(found)
        + f": a Service for this app selects it by {APP_LABEL}={name}; another's is not joined"
    )


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _shown(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in labels.items())
