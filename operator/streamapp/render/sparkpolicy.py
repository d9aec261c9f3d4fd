"""Spark on Kubernetes as a privilege: the ValidatingAdmissionPolicies that gate it and fence it in.

With `spec.executor.sparkExecutors` a member is Spark's driver, and its ServiceAccount may create pods
in the namespace (`controller.permissions.spark_driver_rules`): RBAC cannot say "only Spark's executors". So:

- **The gate.** An install allows such apps only with `--allow-spark-executors` (chart:
  `sparkExecutors.allowed`); the operator refuses them otherwise (`controller.admission`), and
  `gate_policy` refuses them at apply time on installs that do not allow them. An app that had
  `sparkExecutors` before keeps being updatable (the operator flags it; its owner removes the field).
- **The fence.** `member_pod_policy` holds every pod a member's ServiceAccount creates — whatever the
  namespace's Pod Security labels — to the restricted profile (the same generated rules as the
  pod-template policy, `render.admissionpolicy.restricted_rules`, plus the fields restricted requires to be
  set), to the member's own ServiceAccount with no API token, to the app's image, to emptyDir,
  configMap and downwardAPI volumes (no host path, no Secret, no other app's claim) and no Secret in
  the environment. These are exactly the executor pods `executor.sparkk8s` asks Spark for.

Which requests are a member's: a policy cannot read the ServiceAccount, but its binding can take the
namespace's StreamApps as params (`paramKind: StreamApp`, a `paramRef` selector without namespace: the
apps of the request's own namespace, each evaluated in turn). A request is a member's when its user is
`system:serviceaccount:<that namespace>:<app>-<digits>` for one of those apps — the name
`api.names.executor_account` gives it. A namespace without apps matches no param and is allowed; other
controllers' ServiceAccounts are not caught (a `matchCondition` lets only the namespace's own
ServiceAccounts' requests reach the params at all). Members cannot change the params: their Role has
no rights on StreamApps. No rename of any account is needed, so existing members keep their accounts.
"""

from __future__ import annotations

from typing import Any

from streamapp.api.meta import GROUP, VERSION
from streamapp.controller.admission import SPARK_GATE_FIELD as GATE_FIELD
from streamapp.controller.admission import SPARK_GATE_PROBLEM as GATE_PROBLEM
from streamapp.render import admissionpolicy

API_VERSION = admissionpolicy.API_VERSION
GATE_NAME = "streamapp-spark-executors"
MEMBER_PODS_NAME = "streamapp-member-pods"
GATE_MESSAGE = f"{GATE_FIELD}: {GATE_PROBLEM}"
MEMBER_POD_VOLUMES = ("configMap", "downwardAPI", "emptyDir")
SERVICE_ACCOUNT_PREFIX = "'system:serviceaccount:' + request.namespace + ':'"
CONTAINER_LISTS = admissionpolicy.CONTAINER_LISTS


def gate_policy(name: str = GATE_NAME) -> dict[str, Any]:
    """Refuses a StreamApp with `sparkExecutors` (an update of one that already had it passes)."""
    had = "oldObject != null && oldObject.spec.?executor.?sparkExecutors.hasValue()"
    return admissionpolicy.app_policy(
        name,
        validations=[
            {
                "expression": f"!object.spec.?executor.?sparkExecutors.hasValue() || ({had})",
                "message": GATE_MESSAGE,
            }
        ],
    )


def _every_container(check: str) -> str:
    """`check` (over `c`) holds for every container and init container of `variables.spec`."""
    return " && ".join(f"variables.spec.?{key}.orValue([]).all(c, {check})" for key in CONTAINER_LISTS)


def member_pod_rules() -> list[tuple[str, str]]:
    """(CEL, what it refuses) over a pod a member creates: `variables.spec`/`variables.meta` are the
    pod's, `variables.account` the creating ServiceAccount's name, `params` the member's StreamApp."""
    spec = "variables.spec"
    context = f"{spec}.?securityContext"
    required = [
        (
            f"{context}.?runAsNonRoot.orValue(false) == true || "
            + _every_container("c.?securityContext.?runAsNonRoot.orValue(false) == true"),
            "running without runAsNonRoot: true",
        ),
        (
            f"{context}.?seccompProfile.hasValue() || "
            + _every_container("c.?securityContext.?seccompProfile.hasValue()"),
            "no seccomp profile (RuntimeDefault or Localhost)",
        ),
        (
            _every_container("c.?securityContext.?allowPrivilegeEscalation.orValue(true) == false"),
            "privilege escalation (allowPrivilegeEscalation must be false)",
        ),
        (
            _every_container("c.?securityContext.?capabilities.?drop.orValue([]).exists(d, d == 'ALL')"),
            "capabilities kept (capabilities.drop must hold ALL)",
        ),
    ]
    own = [
        (
            f"{spec}.?serviceAccountName.orValue('') == variables.account",
            "another ServiceAccount than the member's own",
        ),
        (
            f"{spec}.?automountServiceAccountToken.orValue(true) == false",
            "an API token (automountServiceAccountToken must be false)",
        ),
        (
            _every_container("c.image == params.spec.executor.image"),
            "an image other than the app's spec.executor.image",
        ),
        (
            f"{spec}.?volumes.orValue([]).all(v, "
            + " || ".join(f"has(v.{source})" for source in MEMBER_POD_VOLUMES)
            + ")",
            f"volumes other than {', '.join(MEMBER_POD_VOLUMES)} (no host path, Secret or claim)",
        ),
        (
            _every_container(
                "c.?env.orValue([]).all(e, !e.?valueFrom.?secretKeyRef.hasValue()) && "
                "c.?envFrom.orValue([]).all(f, !has(f.secretRef))"
            ),
            "a Secret in the environment",
        ),
    ]
    return [*admissionpolicy.restricted_rules(), *required, *own]


def member_pod_policy(name: str = MEMBER_PODS_NAME) -> dict[str, Any]:
    """Holds the pods a StreamApp member's ServiceAccount creates (Spark's executors) to what
    `member_pod_rules` allows; evaluated once per StreamApp of the pod's namespace (its binding's
    params), it applies only when the creating account is one of that app's members."""
    account = f"request.userInfo.username.substring(size({SERVICE_ACCOUNT_PREFIX}))"
    member = (
        "variables.account.startsWith(params.metadata.name + '-') && "
        "variables.account.substring(size(params.metadata.name) + 1).matches('^[0-9]+$')"
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": f"{GROUP}/{VERSION}", "kind": "StreamApp"},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "namespace-service-account",
                    "expression": f"request.userInfo.username.startsWith({SERVICE_ACCOUNT_PREFIX})",
                }
            ],
            "variables": [
                {"name": "account", "expression": account},
                {"name": "member", "expression": member},
                {"name": "spec", "expression": "object.spec"},
                {"name": "meta", "expression": "object.metadata"},
            ],
            "validations": [
                {
                    "expression": f"!variables.member || ({expression})",
                    "message": f"a pod created by a StreamApp member's ServiceAccount (Spark's driver) asks for {what}",
                }
                for expression, what in member_pod_rules()
            ],
        },
    }


def member_pod_binding(name: str = MEMBER_PODS_NAME) -> dict[str, Any]:
    """Every namespace; the params are the StreamApps of the pod's own namespace (none: allowed)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
        },
    }
