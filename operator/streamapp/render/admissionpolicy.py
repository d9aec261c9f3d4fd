"""The pod-template rules as a ValidatingAdmissionPolicy: refused at apply time, so a GitOps sync fails.

The operator holds every member pod to the restricted Pod Security Standard plus its own rules
(`controller.admission`), but it sees an app only after the API server stored it: a refused spec is a
condition on an app that exists. Installed with the chart or the kustomization, this policy makes the
API server refuse such a StreamApp when it is applied, with the rule's message. It is the same rules,
written in CEL over the app's `spec.executor.podTemplate` (its fields beyond the schema's own stay
reachable: the template keeps what it does not declare); the integration test applies both to the same
templates. ValidatingAdmissionPolicy is GA in Kubernetes 1.30; installs that run privileged executors
(`--allow-privileged-pod-templates`) leave it out (the chart's `podTemplatePolicy.enabled`). It also
refuses the operator's own label and annotation keys in a template (`reserved_key_validations`).
"""

from __future__ import annotations

from typing import Any

from streamapp.api import security
from streamapp.api.names import GROUP, RESERVED_KEY_DOMAIN, RESERVED_KEYS
from streamapp.api.streamapp import StreamApp
from streamapp.controller.admission import ALLOW_FLAG

API_VERSION = "admissionregistration.k8s.io/v1"
NAME = "streamapp-pod-templates"
ALLOWED_BY = f"the operator allows it only with {ALLOW_FLAG}"
# Every volume source a Pod accepts that the restricted profile does not (the Pod API's set is closed,
# so refusing these allows exactly configMap, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim,
# projected and secret); inline `csi` is the operator's own refusal.
REFUSED_VOLUMES = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "image",
)
CONTAINER_LISTS = ("containers", "initContainers")


def _quoted(values: tuple[str, ...] | frozenset[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in sorted(values)) + "]"


def _absent(path: str) -> str:
    """CEL: `path`'s last field is absent or null. The API server keeps nulls in the template (its
    fields beyond the schema are preserved as written) and `has()` is true for a null field, whose
    fields are then errors; the operator reads null as absent (`api.podtemplate.without_nulls`)."""
    return f"!has({path}) || {path} == null"


def _unless(path: str, check: str) -> str:
    """`check`, or true when `path`'s last field is absent or null (parenthesized: it is joined with &&)."""
    return f"({_absent(path)} || ({check}))"


def _context_rules(ctx: str, container: bool) -> list[tuple[str, str]]:
    """(CEL over the securityContext `ctx`, what it refuses) — as `controller.admission._context`."""
    rules = [
        (
            _unless(f"{ctx}.runAsNonRoot", f"{ctx}.runAsNonRoot != false"),
            "running as root (runAsNonRoot: false)",
        ),
        (_unless(f"{ctx}.runAsUser", f"{ctx}.runAsUser != 0"), "running as root (user 0)"),
        (
            _unless(
                f"{ctx}.windowsOptions",
                _unless(f"{ctx}.windowsOptions.hostProcess", f"{ctx}.windowsOptions.hostProcess != true"),
            ),
            "Windows host processes",
        ),
        (
            _unless(
                f"{ctx}.seccompProfile", f"{ctx}.seccompProfile.type in {_quoted(security.SECCOMP_TYPES)}"
            ),
            "a seccomp profile other than RuntimeDefault or Localhost",
        ),
        (
            _unless(
                f"{ctx}.appArmorProfile", f"{ctx}.appArmorProfile.type in {_quoted(security.APPARMOR_TYPES)}"
            ),
            "an AppArmor profile other than RuntimeDefault or Localhost",
        ),
        (
            _unless(
                f"{ctx}.seLinuxOptions",
                " && ".join(
                    [
                        _unless(
                            f"{ctx}.seLinuxOptions.type",
                            f"{ctx}.seLinuxOptions.type in {_quoted(security.SELINUX_TYPES)}",
                        ),
                        _unless(f"{ctx}.seLinuxOptions.user", f"{ctx}.seLinuxOptions.user == ''"),
                        _unless(f"{ctx}.seLinuxOptions.role", f"{ctx}.seLinuxOptions.role == ''"),
                    ]
                ),
            ),
            "a custom SELinux type, user or role",
        ),
    ]
    if container:
        rules += [
            (_unless(f"{ctx}.privileged", f"{ctx}.privileged != true"), "privileged containers"),
            (
                _unless(f"{ctx}.allowPrivilegeEscalation", f"{ctx}.allowPrivilegeEscalation != true"),
                "privilege escalation",
            ),
            (
                _unless(
                    f"{ctx}.capabilities",
                    _unless(
                        f"{ctx}.capabilities.add",
                        f"{ctx}.capabilities.add.all(a, a in {_quoted(security.ADDABLE_CAPABILITIES)})",
                    ),
                ),
                "added capabilities (only NET_BIND_SERVICE)",
            ),
            (_unless(f"{ctx}.procMount", f"{ctx}.procMount == 'Default'"), "an unmasked /proc"),
        ]
    else:
        rules.append(
            (
                _unless(
                    f"{ctx}.sysctls", f"{ctx}.sysctls.all(s, s.name in {_quoted(security.SAFE_SYSCTLS)})"
                ),
                "unsafe sysctls",
            )
        )
    return rules


def _unless_port() -> str:
    """CEL over a container's ports `c.ports`: none binds a host port."""
    return f"c.ports.all(p, {_unless('p.hostPort', 'p.hostPort == 0')})"


def validations() -> list[dict[str, str]]:
    """One validation per rule, its message naming what it refuses and how an install may allow it."""
    return [
        {"expression": expression, "message": f"spec.executor.podTemplate asks for {what}; {ALLOWED_BY}"}
        for expression, what in restricted_rules()
    ]


def restricted_rules() -> list[tuple[str, str]]:
    """(CEL, what it refuses) for every rule, over the pod spec `variables.spec` and the pod metadata
    `variables.meta` (also used for the pods members create: `render.sparkpolicy`)."""
    spec = "variables.spec"
    out: list[tuple[str, str]] = [
        (
            _unless(f"{spec}.nodeName", f"{spec}.nodeName == ''"),
            "pinning a member pod to a node by name (nodeName)",
        ),
        *[
            (_unless(f"{spec}.{key}", f"{spec}.{key} != true"), f"the host's namespaces ({key})")
            for key in ("hostNetwork", "hostPID", "hostIPC")
        ],
        (
            _unless(
                f"{spec}.volumes",
                f"{spec}.volumes.all(v, v == null || ("
                + " && ".join(f"({_absent(f'v.{s}')})" for s in REFUSED_VOLUMES)
                + "))",
            ),
            "volumes other than configMap, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected and secret",
        ),
        *[
            (_unless(f"{spec}.securityContext", check), what)
            for check, what in _context_rules(f"{spec}.securityContext", container=False)
        ],
    ]
    for check, what in _context_rules("c.securityContext", container=True):
        every = " && ".join(
            _unless(f"{spec}.{key}", f"{spec}.{key}.all(c, {_unless('c.securityContext', check)})")
            for key in CONTAINER_LISTS
        )
        out.append((every, f"{what} in a container"))
    ports = " && ".join(
        _unless(
            f"{spec}.{key}",
            f"{spec}.{key}.all(c, {_unless('c.ports', _unless_port())})",
        )
        for key in CONTAINER_LISTS
    )
    out.append((ports, "host ports"))
    annotations = "variables.meta.annotations"
    apparmor = (
        f"{annotations}.all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/') || "
        f"{annotations}[k] == 'runtime/default' || {annotations}[k].startsWith('localhost/'))"
    )
    out.append(
        (
            _unless(annotations, apparmor),
            "an AppArmor profile other than runtime/default or localhost/* (annotation)",
        )
    )
    return out


def reserved_key_validations() -> list[dict[str, str]]:
    """The template's labels and annotations may not use the operator's keys (`api.names.reserved_key`,
    `controller.admission.reserved_keys`): one validation each, its message naming the first such key.
    Not a privilege, so no install flag allows them."""
    domain, exact = RESERVED_KEY_DOMAIN, ", ".join(f"'{key}'" for key in RESERVED_KEYS)
    reserved = f"k in [{exact}] || k.startsWith('{domain}/') || k.contains('.{domain}/')"
    out = []
    for field in ("labels", "annotations"):
        keys = f"variables.meta.{field}"
        out.append(
            {
                "expression": _unless(keys, f"!{keys}.exists(k, {reserved})"),
                "messageExpression": (
                    f"'spec.executor.podTemplate.metadata.{field}: the key ' + "
                    f"{keys}.filter(k, {reserved})[0] + ' is reserved for the operator (its own {field})'"
                ),
            }
        )
    return out


def app_policy(name: str, **spec: Any) -> dict[str, Any]:
    """A ValidatingAdmissionPolicy over StreamApps as they are created or changed (refusals fail
    closed): the frame of every policy the project ships over apps; `spec` adds its variables,
    conditions and validations."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [StreamApp.PLURAL],
                    }
                ]
            },
            **spec,
        },
    }


def policy(name: str = NAME) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy over StreamApps' pod templates."""
    return app_policy(
        name,
        variables=[
            {"name": "spec", "expression": "object.spec.executor.?podTemplate.?spec.orValue({})"},
            {"name": "meta", "expression": "object.spec.executor.?podTemplate.?metadata.orValue({})"},
        ],
        validations=[*validations(), *reserved_key_validations()],
    )


def binding(name: str = NAME) -> dict[str, Any]:
    """Its binding: every namespace, refusals denied."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
