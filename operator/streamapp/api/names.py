"""Names and labels of an app's objects, shared by the operator (which creates them) and the executor
(which finds its own StreamAppMember by them).

Members have static ids, so every child's name is derived from the app and the id: the pod
`<app>-<id>`, its state volume `<app>-state-<id>`, its StreamAppMember `<app>-<id>`. The labels are
part of the API too: selectors (`/scale`, HPA, KEDA, the PDB) and the operator's watches use them.

Two apps of a namespace never derive one name, counting those Kubernetes and Spark derive from ours
(an ephemeral volume's claim `<pod>-<volume>`, a Spark executor pod `<pod>-exec-<n>`): the models refuse
the app and volume names that would (`api/streamapp.py`, `api/podtemplate.py`), and a property test
renders both apps' children (tests/controller/test_child_names.py).
"""

from __future__ import annotations

from streamapp.api.member import StreamAppMember
from streamapp.api.meta import GROUP, VERSION
from streamapp.api.streamapp import StreamApp

APPS = StreamApp.PLURAL
MEMBERS = StreamAppMember.PLURAL
__all__ = [
    "APPS",
    "APP_LABEL",
    "EXECUTOR_PORT",
    "EXECUTOR_PORT_NAME",
    "GROUP",
    "HANDOFF_ANNOTATION",
    "MANAGED_ANNOTATIONS",
    "MANAGED_BY",
    "MEMBERS",
    "MEMBER_LABEL",
    "RESERVED_KEYS",
    "RESERVED_KEY_DOMAIN",
    "RESTART_ANNOTATION",
    "REVISION_LABEL",
    "SHARED_IDENTITY_LABEL",
    "STUCK_RESTART",
    "VERSION",
    "executor_account",
    "member_labels",
    "member_name",
    "reserved_key",
    "selector",
    "shared_executor_account",
    "state_claim_name",
]

APP_LABEL = "streamapp.dev/app"
MEMBER_LABEL = "streamapp.dev/member"
# On the one ServiceAccount, Role and RoleBinding all of an app's executors share
# (`executor.serviceAccountScope: app`), in place of the member label of per-member identities.
SHARED_IDENTITY_LABEL = "streamapp.dev/shared-identity"
# The revision (hash) of the spec a member pod was made from, as a Deployment's pod-template-hash.
REVISION_LABEL = "streamapp.dev/pod-template-hash"
# When a rolling update began handing the member's tasks off before replacing its pod (epoch seconds).
HANDOFF_ANNOTATION = "streamapp.dev/handoff-started"
# On a member pod the operator deletes itself (a restart, not a drain): its tasks wait for the new pod.
# Its value says why: "true" for a planned restart (a rollout), STUCK_RESTART for an executor whose
# batch round hung (`rebalance.stuck`), which is a failure like a crash: it counts toward flapping.
RESTART_ANNOTATION = "streamapp.dev/operator-restart"
STUCK_RESTART = "stuck"
MANAGED_BY = {"app.kubernetes.io/managed-by": "streamapp-operator"}
# Label and annotation keys a pod template may not set on member pods: the operator's own domain
# (`streamapp.dev/...` and its subdomains: app and member labels, the revision, the handoff and restart
# marks the operator acts on) and the labels it sets itself.
RESERVED_KEY_DOMAIN = GROUP
RESERVED_KEYS = tuple(MANAGED_BY)


def reserved_key(key: str) -> bool:
    """Whether a pod template's label or annotation key is the operator's to set (pure)."""
    domain = RESERVED_KEY_DOMAIN
    return key in RESERVED_KEYS or key.startswith(f"{domain}/") or f".{domain}/" in key


# Where a member pod serves /metrics, /readyz and /healthz (the executor's default --http-port).
EXECUTOR_PORT = 8080
EXECUTOR_PORT_NAME = "http"
# On a member's ServiceAccount: the annotation keys the operator set from
# spec.executor.serviceAccountAnnotations, so a key removed from the spec is removed from the account.
MANAGED_ANNOTATIONS = "streamapp.dev/managed-annotations"
# Environment of the member pods the executor reads beside the others: the pod's own image (Spark's
# executor pods run it too) and `spec.executor.sparkExecutors` as JSON, set only when Spark runs on the
# cluster.
IMAGE_ENV = "STREAMAPP_IMAGE"
SPARK_EXECUTORS_ENV = "STREAMAPP_SPARK_EXECUTORS"


def member_name(app: str, member: int) -> str:
    """The pod and the StreamAppMember of member `member`."""
    return StreamAppMember.name_for(app, member)


def state_claim_name(app: str, member: int) -> str:
    """The member's state volume claim, which outlives its pods."""
    return f"{app}-state-{member}"


def executor_account(app: str, member: int) -> str:
    """ServiceAccount, Role and RoleBinding of one member's executor: one identity per member, so its
    token is good for its own StreamAppMember and pod only (named like them, so no name gets longer)."""
    return member_name(app, member)


def consumer_group(namespace: str, app: str) -> str:
    """The Kafka consumer group an app's executors commit their consumed offsets to: for lag
    monitoring only (KEDA's Kafka scaler, Burrow, lag exporters); the commit manifests stay the truth."""
    return f"streamapp.{namespace}.{app}"


def selector(app: str) -> str:
    """Label selector of the app's member pods (exposed in status for /scale, HPA and KEDA)."""
    return f"{APP_LABEL}={app}"


def shared_executor_account(app: str) -> str:
    """The ServiceAccount, Role and RoleBinding every executor of the app shares
    (`executor.serviceAccountScope: app`): as long as `<app>-state-<id>`, so it fits wherever that does,
    and never a member's name (those end in a digit)."""
    return f"{app}-executors"


def member_labels(app: str, member: int) -> dict[str, str]:
    """Labels of everything that belongs to one member."""
    return {APP_LABEL: app, MEMBER_LABEL: str(member), **MANAGED_BY}
