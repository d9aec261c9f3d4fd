"""The install manifests (manifests/): namespace, operator RBAC, the operator Deployment, a kustomization.

`kubectl apply -k manifests/` installs everything, the CRDs included (the kustomization pulls in crds/).
The namespace is set by the kustomization, so `kustomize edit set namespace` moves the whole install.
"""

from __future__ import annotations

from typing import Any

from streamapp.api.security import SCRATCH_MOUNT, container_security_context, pod_security_context
from streamapp.controller.permissions import operator_cluster_role_rules, operator_lease_rules
from streamapp.render import admissionpolicy, referencepolicy, sparkpolicy
from streamapp.render.rbac import user_roles
from streamapp.render.yamlfiles import KUSTOMIZATION, Files, render

NAMESPACE = "streamapp-system"
NAME = "streamapp-operator"
IMAGE = "streamapp:0.1.0"
METRICS_PORT = 8080
OPERATOR_COMMAND = [
    "streamapp",
    "operator",
    "--all-namespaces",
    "--metrics-port",
    str(METRICS_PORT),
    "--metrics-address",
    "$(POD_IP)",
]
OPERATOR_REPLICAS = 2
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "streamapp"}
COMMAND = "manifests"
LEASE_ROLE = f"{NAME}-leader-election"


def _namespaced(name: str) -> dict[str, Any]:
    """Metadata of a namespaced object; the namespace is spelled out so the printed stream applies as is
    (the kustomization overrides it)."""
    return {"name": name, "namespace": NAMESPACE, "labels": LABELS}


def namespace() -> dict[str, Any]:
    """The operator's namespace."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": LABELS}}


def rbac() -> list[dict[str, Any]]:
    """The operator's ServiceAccount; its ClusterRole and binding; a Role and binding for its Lease; what
    the built-in `view`, `edit` and `admin` roles gain on StreamApps (aggregated, as with the chart)."""
    rbac_api = "rbac.authorization.k8s.io/v1"
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "name": NAME}
    subjects = [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _namespaced(NAME)},
        {
            "apiVersion": rbac_api,
            "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": LABELS},
            "rules": operator_cluster_role_rules(),
        },
        {
            "apiVersion": rbac_api,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": LABELS},
            "roleRef": {**role_ref, "kind": "ClusterRole"},
            "subjects": subjects,
        },
        {
            "apiVersion": rbac_api,
            "kind": "Role",
            "metadata": _namespaced(LEASE_ROLE),
            "rules": operator_lease_rules(),
        },
        {
            "apiVersion": rbac_api,
            "kind": "RoleBinding",
            "metadata": _namespaced(LEASE_ROLE),
            "roleRef": {**role_ref, "kind": "Role", "name": LEASE_ROLE},
            "subjects": subjects,
        },
        *(
            {
                "apiVersion": rbac_api,
                "kind": "ClusterRole",
                "metadata": {
                    "name": f"{NAME}-{role}",
                    "labels": {**LABELS, f"rbac.authorization.k8s.io/aggregate-to-{role}": "true"},
                },
                "rules": rules,
            }
            for role, rules in user_roles().items()
        ),
    ]


def operator_probes() -> dict[str, Any]:
    """The operator container's probes, the chart's as well (a test holds them equal): `/healthz`
    fails while the leader's event loop is blocked or a reconcile hangs; a replica waiting for the
    Lease is healthy (`controller.health`)."""
    get = {"httpGet": {"path": "/healthz", "port": "metrics"}}
    return {
        "livenessProbe": {**get, "periodSeconds": 20, "timeoutSeconds": 5, "failureThreshold": 6},
        "readinessProbe": {**get, "periodSeconds": 10, "timeoutSeconds": 5},
    }


def _container() -> dict[str, Any]:
    field_env = [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_IP", "status.podIP"),
    ]
    return {
        "name": "operator",
        "image": IMAGE,
        "command": OPERATOR_COMMAND,
        "env": [{"name": n, "valueFrom": {"fieldRef": {"fieldPath": p}}} for n, p in field_env],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        **operator_probes(),
        # The limit leaves ~40% above the 544 MB peak measured placing and scaling out one app of 100,000
        # tasks (bench/results/apiscale.md); 512Mi was below it.
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "768Mi"}},
        "securityContext": container_security_context(),
        # The root filesystem is read-only: temporary files (the client's CA copies, tempfile) go here.
        "volumeMounts": [{"name": "tmp", "mountPath": SCRATCH_MOUNT}],
    }


def deployment() -> dict[str, Any]:
    """The operator: two replicas, one leader (a Lease), spread over nodes so a node drain keeps one."""
    selector = {"app.kubernetes.io/name": NAME}
    spread = {"labelSelector": {"matchLabels": selector}, "topologyKey": "kubernetes.io/hostname"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _namespaced(NAME),
        "spec": {
            "replicas": OPERATOR_REPLICAS,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": pod_security_context(),
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {"weight": 100, "podAffinityTerm": spread}
                            ]
                        }
                    },
                    "containers": [_container()],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


def disruption_budget() -> dict[str, Any]:
    """At most one replica evicted at a time, so a node drain keeps one operator (the chart's
    `podDisruptionBudget`, equal by a test)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _namespaced(NAME),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}}},
    }


def metrics_service() -> dict[str, Any]:
    """The Prometheus endpoint of the operator."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _namespaced(f"{NAME}-metrics"),
        "spec": {
            "selector": {"app.kubernetes.io/name": NAME},
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"}],
        },
    }


# Where files go that an install adds only with a non-default operator flag.
OPTIONAL = "optional"


def manifest_files() -> Files:
    """manifests/: one file per concern and the kustomization that ties them to crds/."""
    files = {
        "namespace.yaml": render([namespace()], COMMAND),
        "rbac.yaml": render(rbac(), COMMAND),
        "operator.yaml": render([deployment(), disruption_budget(), metrics_service()], COMMAND),
        # Refuses, at apply time, a StreamApp whose pod template the operator would refuse (1.30+;
        # leave it out with --allow-privileged-pod-templates).
        "admissionpolicy.yaml": render([admissionpolicy.policy(), admissionpolicy.binding()], COMMAND),
        # Refuses StreamApps with sparkExecutors: this install's operator runs without
        # --allow-spark-executors.
        "sparkexecutors-gate.yaml": render(
            [sparkpolicy.gate_policy(), admissionpolicy.binding(sparkpolicy.GATE_NAME)], COMMAND
        ),
        # Refuses, at apply time, a StreamApp naming a Secret, ConfigMap or claim its author may not
        # get (1.30+); kept with --allow-privileged-pod-templates too.
        "referencepolicy.yaml": render(
            [referencepolicy.policy(), admissionpolicy.binding(referencepolicy.NAME)], COMMAND
        ),
    }
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": NAMESPACE,
        "resources": ["../crds", *files],
    }
    files[KUSTOMIZATION] = render([kustomization], COMMAND)
    # Not in the kustomization (nor in the printed stream): for installs that add
    # --allow-spark-executors, in place of the gate.
    files[f"{OPTIONAL}/sparkexecutors-member-pods.yaml"] = render(
        [sparkpolicy.member_pod_policy(), sparkpolicy.member_pod_binding()], COMMAND
    )
    return files
