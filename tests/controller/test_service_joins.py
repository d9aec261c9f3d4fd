"""A pod template's labels may not put member pods behind another app's Service: refused when a Service
that does not name the app would select the pods through the template's labels alone, naming the
Service and the labels; Services for the app, or selecting by the operator's own labels, are left alone.
The namespace's Services are read once per revision, and only for a template with labels."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from test_controller_core import APP

from streamapp.api.names import APP_LABEL, MANAGED_BY, MEMBER_LABEL
from streamapp.api.streamapp import StreamApp
from streamapp.controller import children
from streamapp.controller.memo import Memo
from streamapp.controller.reconcile import _services_joined
from streamapp.controller.servicejoins import LABELS_PATH, joined


def with_labels(labels: dict[str, str] | None) -> StreamApp:
    body = copy.deepcopy(APP)
    if labels is not None:
        body["spec"]["executor"]["podTemplate"] = {"metadata": {"labels": labels}}
    return StreamApp.from_resource(body)


LABELLED = with_labels({"app": "payments", "team": "data"})


def test_a_service_selecting_the_pods_through_template_labels_alone_is_refused_by_name() -> None:
    message = joined(LABELLED, "r1", {"payments": {"app": "payments"}, "other": {"app": "web"}})
    assert message is not None
    assert LABELS_PATH in message and "Service payments" in message and "app=payments" in message
    assert "Service other" not in message
    both = joined(LABELLED, "r1", {"a": {"team": "data"}, "b": {"app": "payments", "team": "data"}})
    assert both is not None and "Service a" in both and "Service b" in both


def test_services_for_the_app_or_by_the_operators_labels_or_matching_nothing_are_left_alone() -> None:
    left_alone = {
        "for-this-app": {"app": "payments", APP_LABEL: "counts"},
        "all-streamapp-pods": dict(MANAGED_BY),
        "wants-more": {"app": "payments", "tier": "web"},
        "no-selector": {},
        "not-a-member": {"team": "data", MEMBER_LABEL: "x"},
    }
    assert joined(LABELLED, "r1", left_alone) is None
    assert joined(with_labels(None), "r1", {"payments": {"app": "payments"}}) is None


def test_a_selector_naming_a_member_is_judged_for_that_member() -> None:
    assert joined(LABELLED, "r1", {"one": {"team": "data", MEMBER_LABEL: "1"}}) is not None


def test_every_member_pod_carries_the_labels_judged() -> None:
    """What `joined` assumes the pod carries is what the operator renders."""
    pod = children.pod(LABELLED, 1)
    assert {"app": "payments", "team": "data", APP_LABEL: "counts", MEMBER_LABEL: "1"}.items() <= pod[
        "metadata"
    ]["labels"].items()


@dataclass
class CountingKube:
    selectors: dict[str, dict[str, str]]
    reads: list[str] = field(default_factory=list)

    def service_selectors(self, namespace: str) -> dict[str, dict[str, str]]:
        self.reads.append(namespace)
        return self.selectors


def test_services_are_read_once_per_revision_and_never_for_a_template_without_labels() -> None:
    kube, memo = CountingKube({"payments": {"app": "payments"}}), Memo()
    for _ in range(3):
        assert _services_joined(kube, LABELLED, "r1", memo) is not None  # type: ignore[arg-type]
    assert kube.reads == ["ns"]
    assert _services_joined(kube, with_labels({"team": "x"}), "r2", memo) is None  # type: ignore[arg-type]
    assert _services_joined(kube, with_labels(None), "r3", memo) is None  # type: ignore[arg-type]
    assert _services_joined(kube, with_labels({}), "r4", memo) is None  # type: ignore[arg-type]
    assert kube.reads == ["ns", "ns"]
