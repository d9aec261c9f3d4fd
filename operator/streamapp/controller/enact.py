"""The writes a step's decisions become, besides member targets and pods (shell): the rollout's pod
deletions and handoff marks, its Events, and the repairs of the supporting objects.

What to write is decided by the pure modules (`podrollout.pod_writes`, `podrollout.events`,
`supporting.repairs`); this module only makes the calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from streamapp.api.meta import ObjectMeta
from streamapp.api.names import HANDOFF_ANNOTATION
from streamapp.controller import podrollout
from streamapp.controller.kube import Kube
from streamapp.controller.observe import PodState
from streamapp.controller.supporting import Repair
from streamapp.rebalance.rollout import RolloutStep


def rollout(kube: Kube, app: str, namespace: str, step: RolloutStep, pods: Mapping[int, PodState]) -> None:
    """Delete the pods the rollout replaces and set or clear their handoff marks."""
    for write in podrollout.pod_writes(app, step, pods):
        if write.delete:
            kube.delete_pod(
                namespace, write.name, uid=write.uid, grace_seconds=write.grace_seconds, stuck=write.stuck
            )
        else:
            kube.annotate_pod(namespace, write.name, {HANDOFF_ANNOTATION: write.handoff}, uid=write.uid)


def announce(
    kube: Kube,
    app: ObjectMeta,
    step: RolloutStep,
    pods: Mapping[int, PodState],
    active: Mapping[int, int],
) -> None:
    """Post the rollout's Events of this step."""
    for reason, message, warning in podrollout.events(step, pods, active):
        kube.event(app, reason, message, warning=warning)


def repairs(kube: Kube, namespace: str, fixes: Iterable[Repair]) -> None:
    """Perform the repairs (each write tolerates a concurrent identical one)."""
    for fix in fixes:
        if fix.action == "create":
            kube.create(namespace, dict(fix.body))
        elif fix.action == "patch" and fix.kind == "ServiceAccount":
            annotations = dict(fix.body["metadata"]["annotations"])
            kube.patch_account_annotations(namespace, fix.name, annotations, uid=fix.uid)
        elif fix.action == "patch" and fix.kind == "PodDisruptionBudget":
            kube.patch_budget(namespace, fix.name, int(fix.body["spec"]["maxUnavailable"]), uid=fix.uid)
        elif fix.action == "patch":
            kube.patch_role_rules(namespace, fix.name, list(fix.body["rules"]), uid=fix.uid)
        else:
            kube.delete(namespace, fix.kind, fix.name, uid=fix.uid)
