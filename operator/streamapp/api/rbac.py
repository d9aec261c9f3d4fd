"""Who may do what: the executors' per-app Role and the operator's ClusterRole, in one place.

The operator creates a Role with `executor_role_rules()` for every app's executors. Kubernetes lets it
grant only permissions it holds itself (RBAC escalation prevention), so its ClusterRole includes every
executor rule rather than the broader `escalate`/`bind` verbs; `covers` lets the tests prove that.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamapp.api.member import StreamAppMember
from streamapp.api.meta import GROUP
from streamapp.api.streamapp import StreamApp

Rule = dict[str, list[str]]

READ = ["get", "list", "watch"]
MANAGE = [*READ, "create", "update", "patch", "delete"]


def _rule(group: str, resources: list[str], verbs: list[str]) -> Rule:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def executor_role_rules() -> list[Rule]:
    """An executor reads its StreamAppMember (its target), writes only the member's status (its
    progress: it cannot change its own assignment) and reads its pod (to report the pod's UID)."""
    members = StreamAppMember.PLURAL
    return [
        _rule(GROUP, [members], READ),
        _rule(GROUP, [f"{members}/status"], ["get", "patch"]),
        _rule("", ["pods"], ["get"]),
    ]


def operator_cluster_role_rules() -> list[Rule]:
    """What the operator needs in every namespace that holds apps; the comments say why."""
    apps, members = StreamApp.PLURAL, StreamAppMember.PLURAL
    return [
        # Reconcile apps, persist the assignment intent in their status, read their /scale.
        _rule(GROUP, [apps], [*READ, "patch", "update"]),
        _rule(GROUP, [f"{apps}/status", f"{apps}/scale"], ["get", "patch", "update"]),
        # Write each member's target; read (and, to grant it, hold) the executors' status access.
        _rule(GROUP, [members], MANAGE),
        _rule(GROUP, [f"{members}/status"], ["get", "patch", "update"]),
        # The operator's own children: member pods, their state volumes, per-app services.
        _rule("", ["pods", "persistentvolumeclaims", "services"], MANAGE),
        _rule("policy", ["poddisruptionbudgets"], MANAGE),
        # The executors' identity: a ServiceAccount, Role and RoleBinding per app.
        _rule("", ["serviceaccounts"], MANAGE),
        _rule("rbac.authorization.k8s.io", ["roles", "rolebindings"], MANAGE),
        # Events on apps and members for `kubectl describe`.
        _rule("", ["events"], ["create", "patch"]),
        _rule("events.k8s.io", ["events"], ["create", "patch"]),
        # Leader election between the operator's replicas.
        _rule("coordination.k8s.io", ["leases"], ["get", "list", "watch", "create", "update", "patch"]),
        # Nodes' zones, so standbys are placed in another zone than their active.
        _rule("", ["nodes"], READ),
        # kopf discovers the resources it serves and the namespaces it watches.
        _rule("apiextensions.k8s.io", ["customresourcedefinitions"], ["get", "list", "watch"]),
        _rule("", ["namespaces"], ["get", "list", "watch"]),
    ]


def covers(rules: Iterable[Rule], wanted: Rule) -> bool:
    """True when `rules` grant every (group, resource, verb) of `wanted` (no resourceNames involved)."""
    granted = {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    return all(
        (group, resource, verb) in granted
        for group in wanted["apiGroups"]
        for resource in wanted["resources"]
        for verb in wanted["verbs"]
    )
