"""What the operator refuses to run on a StreamApp creator's behalf, beyond what the CRD refuses (pure).

The operator creates member pods with its own rights, so a pod template asking for privileges would
hand them to anyone allowed to create a StreamApp — rights that person may not have (a confused
deputy). So every member pod is held to the Kubernetes **restricted** Pod Security Standard, checked as
an allowlist (what a field may be, not a list of what it may not), for every kind of container (the
executor, sidecars, init containers), plus two rules of the operator's own: no `nodeName` (pinning a
pod to a node by name skips the scheduler, and with it taints and quotas) and no inline CSI volumes
(a driver's volume is whatever the driver makes of its attributes). The operator's own securityContext
defaults are merged under the template field by field (`controller.children`), so a template can add
to them but never drop them; what this module refuses is what a template could still ask for.

The CRD cannot refuse these requests itself: its rules are the same on every install, and some
installs do run privileged executors. So the operator refuses them unless it was started with
`--allow-privileged-pod-templates`. The same rules are a ValidatingAdmissionPolicy that the chart and
the kustomize install ship (`render.admissionpolicy`), so a GitOps sync fails at apply time; this module
is what holds when no such policy is installed. A refused app gets the `Degraded` condition with reason
`InvalidSpec` and a Warning Event, and none of its children is touched — pods already running keep
running.

`spec.executor.sparkExecutors` is a privilege of its own: the member's ServiceAccount may then create
pods in the namespace (Spark's executors). The operator refuses such apps unless it was started with
`--allow-spark-executors` (`admit_spark_executors`; at apply time: `render.sparkpolicy.gate_policy`).

Apart from privileges, a template's labels and annotations may not use the operator's own keys
(`reserved_keys`: `streamapp.dev/...` and the labels it sets), on any install: they would make a member
pod look like another app's or carry the restart and handoff marks the operator acts on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streamapp.api.fields import ValidationError
from streamapp.api.names import reserved_key
from streamapp.api.security import (
    ADDABLE_CAPABILITIES,
    APPARMOR_TYPES,
    SAFE_SYSCTLS,
    SECCOMP_TYPES,
    SELINUX_TYPES,
    VOLUME_TYPES,
)
from streamapp.api.streamapp import StreamApp

TEMPLATE_PATH = "spec.executor.podTemplate"
SPEC_PATH = f"{TEMPLATE_PATH}.spec"
ALLOW_FLAG = "--allow-privileged-pod-templates"
SPARK_ALLOW_FLAG = "--allow-spark-executors"
SPARK_GATE_FIELD = "spec.executor.sparkExecutors"
SPARK_GATE_PROBLEM = (
    "the member's ServiceAccount would create pods in the namespace (Spark's executors); "
    f"the operator allows it only with {SPARK_ALLOW_FLAG}"
)
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


@dataclass(frozen=True)
class PodPolicy:
    """What this operator install lets a pod template ask for."""

    allow_privileged: bool = False
    allow_spark_executors: bool = False


STRICT = PodPolicy()


def admit(app: StreamApp, policy: PodPolicy) -> None:
    """Raise ValidationError naming the first field that asks for what `policy` does not allow."""
    admit_spark_executors(app, policy)
    if policy.allow_privileged:
        return
    for path, problem in violations(app.spec.executor.pod_template or {}):
        raise ValidationError(path, f"{problem}; the operator allows it only with {ALLOW_FLAG}")


def admit_spark_executors(app: StreamApp, policy: PodPolicy) -> None:
    """Refuse `sparkExecutors` unless the install allows it: handing a tenant's app the right to
    create pods is the install's decision, as privileged pod templates are."""
    if app.spec.executor.spark_executors is not None and not policy.allow_spark_executors:
        raise ValidationError(SPARK_GATE_FIELD, SPARK_GATE_PROBLEM)


def violations(template: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(field path, what is wrong) for everything a pod template asks for beyond the restricted profile
    and the operator's rules."""
    metadata = template.get("metadata")
    if isinstance(metadata, Mapping):
        yield from _annotations(metadata.get("annotations"))
    spec = template.get("spec")
    if isinstance(spec, Mapping):
        yield from _pod_spec(spec)


def _pod_spec(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    if spec.get("nodeName"):
        yield f"{SPEC_PATH}.nodeName", "pinning a member pod to a node by name bypasses the scheduler"
    for key in HOST_NAMESPACES:
        if spec.get(key) is True:
            yield f"{SPEC_PATH}.{key}", "the host's namespaces are not for executors"
    for index, volume in _items(spec, "volumes"):
        sources = sorted(set(volume) - {"name"})
        refused = [s for s in sources if s not in VOLUME_TYPES]
        if refused:
            yield (
                f"{SPEC_PATH}.volumes[{index}].{refused[0]}",
                f"{refused[0]} volumes are not allowed (restricted: {', '.join(sorted(VOLUME_TYPES))})",
            )
    yield from _context(spec.get("securityContext"), f"{SPEC_PATH}.securityContext", pod=True)
    for key in CONTAINER_LISTS:
        for index, container in _items(spec, key):
            path = f"{SPEC_PATH}.{key}[{index}]"
            yield from _context(container.get("securityContext"), f"{path}.securityContext", pod=False)
            for port_index, port in _items(container, "ports"):
                if port.get("hostPort"):
                    yield f"{path}.ports[{port_index}].hostPort", "host ports bind the node's network"


def _context(context: object, path: str, pod: bool) -> Iterator[tuple[str, str]]:
    """A pod's or a container's securityContext, field by field."""
    if not isinstance(context, Mapping):
        return
    if not pod and context.get("privileged") is True:
        yield f"{path}.privileged", "privileged containers"
    if not pod and context.get("allowPrivilegeEscalation") is True:
        yield f"{path}.allowPrivilegeEscalation", "privilege escalation"
    if context.get("runAsNonRoot") is False:
        yield f"{path}.runAsNonRoot", "running as root (runAsNonRoot: false)"
    user = context.get("runAsUser")
    if user == 0 and not isinstance(user, bool):
        yield f"{path}.runAsUser", "running as root (user 0)"
    windows = context.get("windowsOptions")
    if isinstance(windows, Mapping) and windows.get("hostProcess") is True:
        yield f"{path}.windowsOptions.hostProcess", "Windows host processes"
    yield from _profile(context.get("seccompProfile"), f"{path}.seccompProfile", SECCOMP_TYPES, "seccomp")
    yield from _profile(context.get("appArmorProfile"), f"{path}.appArmorProfile", APPARMOR_TYPES, "AppArmor")
    selinux = context.get("seLinuxOptions")
    if isinstance(selinux, Mapping):
        if selinux.get("type", "") not in SELINUX_TYPES:
            yield f"{path}.seLinuxOptions.type", f"SELinux type {selinux.get('type')!r}"
        for key in ("user", "role"):
            if selinux.get(key):
                yield f"{path}.seLinuxOptions.{key}", f"a custom SELinux {key}"
    if not pod:
        capabilities = context.get("capabilities")
        added = capabilities.get("add") if isinstance(capabilities, Mapping) else None
        if isinstance(added, list) and set(map(str, added)) - ADDABLE_CAPABILITIES:
            yield f"{path}.capabilities.add", "added capabilities (only NET_BIND_SERVICE)"
        if context.get("procMount") not in (None, "Default"):
            yield f"{path}.procMount", "an unmasked /proc"
    for index, sysctl in _items(context, "sysctls"):
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield f"{path}.sysctls[{index}].name", f"the unsafe sysctl {sysctl.get('name')!r}"


def _profile(profile: object, path: str, allowed: frozenset[str], what: str) -> Iterator[tuple[str, str]]:
    if isinstance(profile, Mapping) and profile.get("type") not in allowed:
        yield (
            f"{path}.type",
            f"the {what} profile {profile.get('type')!r} (only {' or '.join(sorted(allowed))})",
        )


def _annotations(annotations: object) -> Iterator[tuple[str, str]]:
    """AppArmor set by the older annotation: only the runtime's default or a local profile."""
    if not isinstance(annotations, Mapping):
        return
    for key, value in annotations.items():
        if str(key).startswith(APPARMOR_ANNOTATION) and not (
            value == "runtime/default" or str(value).startswith("localhost/")
        ):
            yield f"{TEMPLATE_PATH}.metadata.annotations[{key}]", f"the AppArmor profile {value!r}"


def _items(parent: Mapping[str, Any], key: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The object entries of a list field, with their indices (anything else was refused earlier)."""
    value = parent.get(key)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, Mapping):
                yield index, item


def admit_metadata(app: StreamApp) -> None:
    """Raise ValidationError naming the first reserved key the pod template sets (`reserved_keys`);
    refused on every install, privileged ones too: it is no privilege but the operator's own marks."""
    for path, problem in reserved_keys(app.spec.executor.pod_template or {}):
        raise ValidationError(path, problem)


def reserved_keys(template: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(field path, what is wrong) for each label or annotation of the template whose key is the
    operator's (`api.names.reserved_key`). Template labels and annotations go onto every member pod:
    with the operator's keys a template could make a pod look like another app's member or revision,
    or carry the restart or handoff marks the operator acts on (an eviction taken for its own restart
    would keep the member's tasks waiting instead of handing them over)."""
    metadata = template.get("metadata")
    if not isinstance(metadata, Mapping):
        return
    for field in ("labels", "annotations"):
        keys = metadata.get(field)
        if not isinstance(keys, Mapping):
            continue
        for key in keys:
            if reserved_key(str(key)):
                yield (
                    f"{TEMPLATE_PATH}.metadata.{field}[{key}]",
                    f"the key {key} is reserved for the operator (its own {field})",
                )
