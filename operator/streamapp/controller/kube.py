"""The operator's writes to the Kubernetes API, and nothing else (the imperative shell's edge).

Reads come from kopf's watch-fed indices, never from LIST calls, so a reconcile costs writes only
for what changed (only after kopf re-lists a kind does `controller.relist` list, to find what the
indices still hold though it is gone). Creating something that already exists and deleting something already gone are
not errors: a restarted operator may repeat the last step it took — but only when what exists is the
operator's own. A name can be taken by anyone who may create objects in the namespace: an object that
merely carries the name the operator would give its child (a ServiceAccount bound to `edit`, a claim
holding someone's data, a StatefulSet's pod) is never used, adopted or deleted; creating over it raises
`NameConflict`, which the reconcile shows as the app's condition. Ownership is the controller
ownerReference with the app's UID, as the watches judge their children (`observe.children_of`).

Every patch and delete of a child is conditional on the UID of the object the watch showed (`uid`): a
child deleted and re-created under its name by someone else between that event and the write is
another object, and the API server refuses the write (409: a delete's `preconditions.uid`, a patch's
`metadata.uid`, refused as an immutable field). Such a refusal is not retried: the object is not this app's, and the watch brings
what is there now (`_unless_replaced`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from streamapp.api.meta import ObjectMeta
from streamapp.api.names import APPS, GROUP, MEMBERS, RESTART_ANNOTATION, STUCK_RESTART, VERSION

log = logging.getLogger(__name__)
# An Event's message is kept to 1 kB: what a person reads in `kubectl describe`, not a log.
EVENT_MESSAGE_LIMIT = 1024
Body = Mapping[str, Any]


class NotLeading(RuntimeError):
    """A write was attempted after this replica stopped leading; it must not reach the API."""


class NameConflict(RuntimeError):
    """A child's name is taken by an object that is not this app's."""

    def __init__(self, kind: str, namespace: str, name: str, holder: str) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        super().__init__(
            f"{kind} {namespace}/{name} already exists and is not this app's ({holder}): the operator "
            "neither uses nor deletes it; rename the app or remove that object"
        )


class Kube:
    """Typed helpers over the official client for the objects the operator owns.

    `leading` fences writes: a reconcile still in flight when the Lease is lost (it runs in a worker
    thread and cannot be interrupted mid-call) fails at its next write instead of acting alongside
    the new leader.
    """

    def __init__(self, api: client.ApiClient, leading: Callable[[], bool] = lambda: True) -> None:
        self.leading = leading
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.policy = client.PolicyV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)

    def patch_app_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None = None
    ) -> dict[str, Any]:
        """Merge-patch the StreamApp's status subresource; returns the updated object.

        With `resource_version` the write is conditional (409 Conflict if the app changed since it was
        read): the intent is then never written from a plan made on a stale view of the app.
        """
        self._guard()
        body: dict[str, Any] = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        updated = self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, APPS, name, body
        )
        return dict(updated) if isinstance(updated, Mapping) else {}

    def scale_app(self, namespace: str, name: str, replicas: int) -> None:
        """Set the StreamApp's spec.replicas through its /scale subresource, as an HPA does (the
        operator's autoscaler: spec.autoscaling)."""
        self._guard()
        self.custom.patch_namespaced_custom_object_scale(
            GROUP, VERSION, namespace, APPS, name, {"spec": {"replicas": replicas}}
        )

    def create_member(self, namespace: str, body: dict[str, Any]) -> None:
        """Create a StreamAppMember (an existing one of this app's is left alone)."""
        self._guard()
        name = body["metadata"]["name"]
        self._create_owned(
            lambda: self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, body),
            lambda: self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, MEMBERS, name),
            "StreamAppMember",
            namespace,
            body,
        )

    def patch_member_spec(
        self, namespace: str, name: str, spec: dict[str, Any], *, uid: str, version: str | None = None
    ) -> None:
        """Replace the target fields of the StreamAppMember `uid`'s spec (a merge patch: `packed` is
        written as null unless set, so a target back in list form drops the packed one it replaces);
        with `version`, only while the object is at that resourceVersion (409 Conflict otherwise)."""
        self._guard()
        meta = {**_same(uid), **({"resourceVersion": version} if version else {})}
        body = {"metadata": meta, "spec": {"packed": None, **spec}}
        _unless_replaced(
            lambda: self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, MEMBERS, name, body
            ),
            "StreamAppMember",
            namespace,
            name,
        )

    def delete_member(self, namespace: str, name: str, *, uid: str) -> None:
        """Delete the StreamAppMember `uid`."""
        self._guard()
        _unless_replaced(
            lambda: self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, MEMBERS, name, body=_only(uid)
            ),
            "StreamAppMember",
            namespace,
            name,
        )

    def create(self, namespace: str, body: dict[str, Any]) -> None:
        """Create a core/policy/rbac object of the kinds the operator owns (an existing one of this
        app's: left alone; anyone else's: `NameConflict`)."""
        self._guard()
        kind, name = body["kind"], body["metadata"]["name"]
        creators: dict[str, Callable[..., Any]] = {
            "Pod": self.core.create_namespaced_pod,
            "PersistentVolumeClaim": self.core.create_namespaced_persistent_volume_claim,
            "Service": self.core.create_namespaced_service,
            "ServiceAccount": self.core.create_namespaced_service_account,
            "PodDisruptionBudget": self.policy.create_namespaced_pod_disruption_budget,
            "Role": self.rbac.create_namespaced_role,
            "RoleBinding": self.rbac.create_namespaced_role_binding,
        }
        readers: dict[str, Callable[..., Any]] = {
            "Pod": self.core.read_namespaced_pod,
            "PersistentVolumeClaim": self.core.read_namespaced_persistent_volume_claim,
            "Service": self.core.read_namespaced_service,
            "ServiceAccount": self.core.read_namespaced_service_account,
            "PodDisruptionBudget": self.policy.read_namespaced_pod_disruption_budget,
            "Role": self.rbac.read_namespaced_role,
            "RoleBinding": self.rbac.read_namespaced_role_binding,
        }
        self._create_owned(
            lambda: creators[kind](namespace, body),
            lambda: readers[kind](name, namespace),
            kind,
            namespace,
            body,
        )

    def _create_owned(
        self,
        create: Callable[[], Any],
        read: Callable[[], Any],
        kind: str,
        namespace: str,
        body: Mapping[str, Any],
    ) -> None:
        """Create; when the name exists, leave it if it carries the same controller as `body` (this
        app's, created by an earlier reconcile), else raise `NameConflict` naming its holder."""
        try:
            create()
        except ApiException as error:
            if error.status != 409:
                raise
            existing = self.core.api_client.sanitize_for_serialization(read())
            mine, theirs = controller_of(body), controller_of(existing)
            if mine is None or (theirs is not None and theirs.get("uid") == mine.get("uid")):
                return
            holder = f"controlled by {theirs.get('kind')} {theirs.get('name')}" if theirs else "no controller"
            raise NameConflict(kind, namespace, str(body["metadata"]["name"]), holder) from None

    def dry_run_pod(self, namespace: str, body: dict[str, Any]) -> str | None:
        """Put a pod to the API server without creating it (`dryRun: All`: every admission step runs,
        nothing is stored); why it refuses it (a 4xx), or None."""
        self._guard()
        create: Callable[..., Any] = self.core.create_namespaced_pod
        try:
            create(namespace, body, dry_run="All")
        except ApiException as error:
            if error.status is None or not 400 <= error.status < 500 or error.status == 409:
                raise
            return server_message(error)
        return None

    def patch_role_rules(self, namespace: str, name: str, rules: list[dict[str, Any]], *, uid: str) -> None:
        """Put the Role `uid`'s rules back to what the operator grants."""
        self._guard()
        body = {"metadata": _same(uid), "rules": rules}
        _unless_replaced(
            lambda: self.rbac.patch_namespaced_role(name, namespace, body), "Role", namespace, name
        )

    def patch_account_annotations(
        self, namespace: str, name: str, annotations: dict[str, str | None], *, uid: str
    ) -> None:
        """Merge-patch the member ServiceAccount `uid`'s annotations (None removes one)."""
        self._guard()
        body = {"metadata": {**_same(uid), "annotations": annotations}}
        _unless_replaced(
            lambda: self.core.patch_namespaced_service_account(name, namespace, body),
            "ServiceAccount",
            namespace,
            name,
        )

    def patch_budget(self, namespace: str, name: str, max_unavailable: int, *, uid: str) -> None:
        """Set the app's PodDisruptionBudget `uid` to `maxUnavailable` (it follows rollingUpdate's)."""
        self._guard()
        body = {"metadata": _same(uid), "spec": {"maxUnavailable": max_unavailable}}
        _unless_replaced(
            lambda: self.policy.patch_namespaced_pod_disruption_budget(name, namespace, body),
            "PodDisruptionBudget",
            namespace,
            name,
        )

    def delete(self, namespace: str, kind: str, name: str, *, uid: str) -> None:
        """Delete the member's ServiceAccount, Role or RoleBinding `uid` (already gone: fine)."""
        self._guard()
        deleters: dict[str, Callable[..., Any]] = {
            "ServiceAccount": self.core.delete_namespaced_service_account,
            "Role": self.rbac.delete_namespaced_role,
            "RoleBinding": self.rbac.delete_namespaced_role_binding,
        }
        _unless_replaced(lambda: deleters[kind](name, namespace, body=_only(uid)), kind, namespace, name)

    def delete_pod(
        self, namespace: str, name: str, *, uid: str, grace_seconds: int | None = None, stuck: bool = False
    ) -> None:
        """Delete the member pod `uid`, which the operator restarts itself (its grace period lets the
        executor commit and stop; `grace_seconds` shortens it for an executor that cannot). The pod is
        first marked so, and why (`stuck`: its executor hung, a failure; otherwise a planned restart): a
        pod deleted by anyone else (an eviction, a node drain) is what the operator drains, handing its
        tasks over while its executor still runs."""
        self._guard()
        mark = STUCK_RESTART if stuck else "true"
        self.annotate_pod(namespace, name, {RESTART_ANNOTATION: mark}, uid=uid)
        body = _only(uid)
        body.grace_period_seconds = grace_seconds
        _unless_replaced(
            lambda: self.core.delete_namespaced_pod(name, namespace, body=body), "Pod", namespace, name
        )

    def annotate_pod(
        self, namespace: str, name: str, annotations: dict[str, str | None], *, uid: str
    ) -> None:
        """Merge annotations into the member pod `uid` (None removes one); a pod already gone is fine."""
        self._guard()
        body = {"metadata": {**_same(uid), "annotations": annotations}}
        _unless_replaced(
            lambda: self.core.patch_namespaced_pod(name, namespace, body), "Pod", namespace, name
        )

    def service_selectors(self, namespace: str) -> dict[str, dict[str, str]]:
        """Each Service of the namespace by name, with its selector ({} for one without): read only for
        a pod template with labels, once per revision (`controller.servicejoins`)."""
        self._guard()
        listed: Body = self.core.api_client.sanitize_for_serialization(
            self.core.list_namespaced_service(namespace)
        )
        return {
            str(s["metadata"]["name"]): dict((s.get("spec") or {}).get("selector") or {})
            for s in listed.get("items") or []
        }

    def read_claim(self, namespace: str, name: str) -> Body | None:
        """A claim as it is now, or None when there is none (claims are not watched: only the few a
        pod template names are read, `controller.claims`)."""
        try:
            found: Body = self.core.api_client.sanitize_for_serialization(
                self.core.read_namespaced_persistent_volume_claim(name, namespace)
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def delete_claim(self, namespace: str, name: str, owner_uid: str) -> None:
        """Delete a member's state volume claim if it is the app's (`owner_uid`); a claim of the same
        name that is anyone else's holds their data and is left alone. The delete is conditional on
        the UID just read, so a claim re-created meanwhile is not taken for the one checked."""
        self._guard()
        try:
            found = self.core.api_client.sanitize_for_serialization(
                self.core.read_namespaced_persistent_volume_claim(name, namespace)
            )
        except ApiException as error:
            if error.status == 404:
                return
            raise
        owner = controller_of(found)
        if owner is None or owner.get("uid") != owner_uid:
            log.warning("claim %s/%s is not this app's; it is not deleted", namespace, name)
            return
        options = _only(found["metadata"]["uid"])
        _unless_replaced(
            lambda: self.core.delete_namespaced_persistent_volume_claim(name, namespace, body=options),
            "PersistentVolumeClaim",
            namespace,
            name,
        )

    def event(self, app: ObjectMeta, reason: str, message: str, warning: bool = False) -> None:
        """Post a Kubernetes Event on the StreamApp `app` names (best effort: events must never block a
        reconcile)."""
        self._guard()
        now = dt.datetime.now(dt.UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name=f"{app.name}.", namespace=app.namespace),
            involved_object=client.V1ObjectReference(
                api_version=f"{GROUP}/{VERSION}",
                kind="StreamApp",
                name=app.name,
                namespace=app.namespace,
                uid=app.uid,
            ),
            reason=reason,
            message=message[:EVENT_MESSAGE_LIMIT],
            type="Warning" if warning else "Normal",
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=client.V1EventSource(component="streamapp-operator"),
        )
        try:
            self.core.create_namespaced_event(str(app.namespace), body)
        except ApiException as error:
            log.warning("event %s on %s not posted: %s", reason, app.name, error.reason)

    def _guard(self) -> None:
        if not self.leading():
            raise NotLeading("this replica no longer holds the lease")


def server_message(error: ApiException) -> str:
    """The API server's own message for a refusal (its Status body), else the reason."""
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)[:1000]
    except (ValueError, AttributeError):
        return str(error.reason)


def controller_of(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object's controller ownerReference, if any."""
    refs = (body.get("metadata") or {}).get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def _other_object(error: ApiException) -> bool:
    """Whether the API server refused a write for its UID condition: a delete's failed precondition
    is a 409 Conflict saying "the UID in the precondition ... does not match"; a patch whose metadata.uid is not the stored
    object's is a 422 naming metadata.uid ("field is immutable"), as the API server answers them
    (checked in tests/integration/test_ownership_preconditions.py). Any other conflict is a conflict:
    it propagates, and a streak of them is shown (`controller.conflicts`)."""
    if error.status == 409:
        return "UID in the precondition" in (error.body or "")
    if error.status != 422:
        return False
    try:
        causes = json.loads(error.body or "{}").get("details", {}).get("causes") or []
    except (ValueError, AttributeError):
        return False
    return any(cause.get("field") == "metadata.uid" for cause in causes)


def _only(uid: str) -> client.V1DeleteOptions:
    """Delete options that make the delete apply only to the object `uid` (409 for any other); an
    unknown uid (never so for an object a watch delivered) makes no condition."""
    return client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid) if uid else None)


def _same(uid: str) -> dict[str, str]:
    """The metadata that makes a patch apply only to the object `uid`: the API server refuses (422) a
    patch whose metadata.uid is not the stored object's; an unknown uid makes no condition."""
    return {"uid": uid} if uid else {}


def _unless_replaced(call: Callable[[], Any], kind: str, namespace: str, name: str) -> None:
    """Make a write conditional on a UID; gone (404) is fine, and so is another object under the name
    (re-created by someone else since the watch showed ours: `_other_object`), which is left alone
    and logged."""
    try:
        call()
    except ApiException as error:
        if _other_object(error):
            log.warning(
                "%s %s/%s was replaced by another object: not this app's, left alone", kind, namespace, name
            )
            return
        if error.status != 404:
            raise
