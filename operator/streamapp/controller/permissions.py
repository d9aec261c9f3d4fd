"""The rights the operator's own calls need, and the rights it grants each app's executors.

Declared here, beside `kube` (the calls) and `children` (which creates each member's Role), and collected
by `streamapp.render.rbac` into the ClusterRole, the chart and the manifests. Kubernetes lets the
operator grant only permissions it holds itself (RBAC escalation prevention), so its ClusterRole
includes every executor rule rather than the broader `escalate`/`bind` verbs.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamapp.api.member import StreamAppMember
from streamapp.api.meta import GROUP
from streamapp.api.streamapp import StreamApp

Rule = dict[str, list[str]]

READ = ["get", "list", "watch"]


def rule(group: str, resources: list[str], verbs: list[str]) -> Rule:
    """One RBAC rule in the shape Role and ClusterRole objects carry."""
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def _named(group: str, resources: list[str], verbs: list[str], *names: str) -> Rule:
    return {**rule(group, resources, verbs), "resourceNames": list(names)}


# What Spark's driver does in its namespace to run executors as pods (client mode): create, watch and
# delete them and the config maps and claims it may give them.
SPARK_DRIVER_VERBS = [*READ, "create", "delete", "deletecollection"]
SPARK_DRIVER_RESOURCES = ["pods", "services", "configmaps", "persistentvolumeclaims"]


def spark_driver_rules() -> list[Rule]:
    """A member whose Spark runs on the cluster (`spec.executor.sparkExecutors`) is Spark's driver: it
    creates its executor pods (and their config maps) and deletes them. RBAC cannot narrow this to its
    own executors, so it reaches every pod of the namespace: such apps belong in a namespace of their own.
    What pods it may create is narrowed by an admission policy instead (`render.sparkpolicy`)."""
    return [rule("", SPARK_DRIVER_RESOURCES, SPARK_DRIVER_VERBS)]


def executor_role_rules(member: str | Sequence[str], spark_driver: bool = False) -> list[Rule]:
    """One executor's rights, on its own objects only (`member` names both its StreamAppMember and its
    pod): read its target (a watch with a `metadata.name` field selector), write only that member's
    status (its progress: it cannot change its own assignment, nor report for another member) and read
    its pod (to report the pod's UID). Executors run user code; a token that could forge another
    member's acknowledgement or lag would cause premature or cold handoffs. With `spark_driver`, also
    what Spark's driver needs (`spark_driver_rules`). An account all of an app's executors share
    (`serviceAccountScope: app`) gets the same rights on every member it names."""
    members = StreamAppMember.PLURAL
    names = [member] if isinstance(member, str) else list(member)
    if not names:  # RBAC reads no resourceNames as every name: never grant that
        raise ValueError("an executor Role names at least one member")
    own = [
        _named(GROUP, [members], READ, *names),
        _named(GROUP, [f"{members}/status"], ["get", "patch"], *names),
        _named("", ["pods"], ["get"], *names),
    ]
    return own + (spark_driver_rules() if spark_driver else [])


def operator_cluster_role_rules() -> list[Rule]:
    """What the operator needs in every namespace that holds apps, and nothing it does not use.

    Reads come from watches (list + watch); writes are the calls the controller makes. Leader election
    is not here: the Lease lives in the operator's own namespace (`operator_lease_rules`).
    """
    apps, members = StreamApp.PLURAL, StreamAppMember.PLURAL
    return [
        # Watch apps; persist the assignment intent and the summary in their status.
        rule(GROUP, [apps], READ),
        rule(GROUP, [f"{apps}/status"], ["get", "patch"]),
        # The operator's own autoscaler (spec.autoscaling) sets replicas the way an HPA does, and
        # nothing else of the spec.
        rule(GROUP, [f"{apps}/scale"], ["patch"]),
        # Every child's ownerReference sets blockOwnerDeletion: clusters running the
        # OwnerReferencesPermissionEnforcement admission plugin (OpenShift) let only someone who may
        # update the owner's finalizers set it, and refuse the child's create otherwise.
        rule(GROUP, [f"{apps}/finalizers"], ["update"]),
        # Write each member's target; hold the executors' status access so the operator may grant it.
        rule(GROUP, [members], [*READ, "create", "patch", "delete"]),
        rule(GROUP, [f"{members}/status"], ["get", "patch"]),
        # Member pods (watched; `get` is also granted to executors; `patch` marks a rolling update's
        # handoff, and the operator's own deletions, on the pod), their state volumes (`get`: a claim is
        # deleted, or taken as existing, only when it is the app's).
        rule("", ["pods"], [*READ, "create", "patch", "delete"]),
        rule("", ["persistentvolumeclaims"], ["get", "create", "delete"]),
        # The other children are watched too, so one deleted or altered by hand is repaired on the
        # next pass: the headless Service, the PDB (patched to follow rollingUpdate.maxUnavailable),
        # each member's ServiceAccount (patched: its workload-identity annotations), Role and binding.
        rule("", ["services"], [*READ, "create"]),
        rule("policy", ["poddisruptionbudgets"], [*READ, "create", "patch"]),
        rule("", ["serviceaccounts"], [*READ, "create", "patch", "delete"]),
        rule("rbac.authorization.k8s.io", ["roles", "rolebindings"], [*READ, "create", "patch", "delete"]),
        # Held only so that it may grant them to the members of apps whose Spark runs on the cluster
        # (`spark_driver_rules`): the operator itself never touches configmaps or other apps' pods.
        *spark_driver_rules(),
        # Events on apps for `kubectl describe`.
        rule("", ["events"], ["create"]),
        # Nodes' zones, so standbys are placed in another zone than their active.
        rule("", ["nodes"], READ),
        # kopf discovers the resources it serves and the namespaces it watches.
        rule("apiextensions.k8s.io", ["customresourcedefinitions"], READ),
        rule("", ["namespaces"], READ),
    ]


def operator_lease_rules() -> list[Rule]:
    """Leader election between the operator's replicas: one Lease in the operator's own namespace,
    read, created once and renewed by replacing it (a namespaced Role, not cluster-wide rights)."""
    return [rule("coordination.k8s.io", ["leases"], ["get", "create", "update"])]
