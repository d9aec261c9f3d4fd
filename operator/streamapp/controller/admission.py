"""What the operator refuses to run on a StreamApp creator's behalf, beyond what the CRD refuses (pure).

The operator creates member pods with its own rights, so a pod template asking for privileges would
hand them to anyone allowed to create a StreamApp — rights that person may not have (a confused
deputy). The CRD cannot refuse these requests itself: its rules are the same on every install, and
some installs do run privileged executors. So the operator refuses them unless it was started with
`--allow-privileged-pod-templates`: privileged containers, privilege escalation, added capabilities,
root (`runAsUser: 0`), Windows host processes, host ports, hostPath volumes and the host's network,
PID and IPC namespaces — the requests the Kubernetes "baseline" Pod Security Standard forbids that a
template can make. A refused app gets the `Degraded` condition with reason `InvalidSpec` and a
Warning Event, and none of its children is touched.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streamapp.api.fields import ValidationError
from streamapp.api.streamapp import StreamApp

TEMPLATE_PATH = "spec.executor.podTemplate.spec"
ALLOW_FLAG = "--allow-privileged-pod-templates"
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


@dataclass(frozen=True)
class PodPolicy:
    """What this operator install lets a pod template ask for."""

    allow_privileged: bool = False


STRICT = PodPolicy()


def admit(app: StreamApp, policy: PodPolicy) -> None:
    """Raise ValidationError naming the first field that asks for what `policy` does not allow."""
    if policy.allow_privileged:
        return
    spec = (app.spec.executor.pod_template or {}).get("spec")
    for path, problem in privilege_requests(spec if isinstance(spec, Mapping) else {}):
        raise ValidationError(path, f"{problem}; the operator allows it only with {ALLOW_FLAG}")


def privilege_requests(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(field path, what it asks for) for every privilege a pod template's spec requests."""
    for key in HOST_NAMESPACES:
        if spec.get(key) is True:
            yield f"{TEMPLATE_PATH}.{key}", "the host's namespaces are not for executors"
    for index, volume in _items(spec, "volumes"):
        if volume.get("hostPath") is not None:
            yield f"{TEMPLATE_PATH}.volumes[{index}].hostPath", "hostPath volumes expose the node"
    yield from _security_context(spec.get("securityContext"), f"{TEMPLATE_PATH}.securityContext")
    for key in CONTAINER_LISTS:
        for index, container in _items(spec, key):
            path = f"{TEMPLATE_PATH}.{key}[{index}]"
            yield from _security_context(container.get("securityContext"), f"{path}.securityContext")
            for port_index, port in _items(container, "ports"):
                if port.get("hostPort"):
                    yield f"{path}.ports[{port_index}].hostPort", "host ports bind the node's network"


def _security_context(context: object, path: str) -> Iterator[tuple[str, str]]:
    """A pod's or a container's securityContext (the pod-level one has no privileged/capabilities)."""
    if not isinstance(context, Mapping):
        return
    if context.get("privileged") is True:
        yield f"{path}.privileged", "privileged containers"
    if context.get("allowPrivilegeEscalation") is True:
        yield f"{path}.allowPrivilegeEscalation", "privilege escalation"
    user = context.get("runAsUser")
    if user == 0 and not isinstance(user, bool):
        yield f"{path}.runAsUser", "running as root (user 0)"
    windows = context.get("windowsOptions")
    if isinstance(windows, Mapping) and windows.get("hostProcess") is True:
        yield f"{path}.windowsOptions.hostProcess", "Windows host processes"
    capabilities = context.get("capabilities")
    if isinstance(capabilities, Mapping) and capabilities.get("add"):
        yield f"{path}.capabilities.add", "added capabilities"


def _items(parent: Mapping[str, Any], key: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The object entries of a list field, with their indices (anything else was refused earlier)."""
    value = parent.get(key)
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, Mapping):
                yield index, item
