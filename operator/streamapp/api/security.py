"""How the project's pods run: one restricted profile for the operator and the executors alike.

The image runs as an unprivileged user (`RUN_AS_USER`, no login shell, owns nothing outside its
writable volumes), so pods can hold the Kubernetes "restricted" Pod Security Standard: non-root, no
privilege escalation, every capability dropped, the runtime's default seccomp profile, and a
read-only root filesystem with `/tmp` (Spark's scratch space, the JVM's temp files) on an emptyDir.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# What the restricted Pod Security Standard lets a pod ask for (`controller.admission` checks templates
# by these; `render.admissionpolicy` writes the same rules in CEL). Inline `csi` volumes are refused too:
# the operator's own rule.
VOLUME_TYPES = frozenset(
    {"configMap", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)
SECCOMP_TYPES = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
ADDABLE_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)

RUN_AS_USER = 65532
SCRATCH_MOUNT = "/tmp"


def pod_security_context() -> dict[str, Any]:
    """Pod-level settings; `fsGroup` makes mounted volumes writable by the image's user."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    """Container-level settings."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def merged_pod_context(template: object) -> dict[str, Any]:
    """The pod's securityContext: ours, with what the template sets on top, field by field. A
    template's `securityContext: {}` (or one setting only fsGroup) keeps non-root, the uid and the
    runtime's seccomp profile; what it may not set at all (root, another seccomp type) the operator
    refuses (`controller.admission`). A null in the template means absent: the template is read
    without its nulls (`api.podtemplate.without_nulls`), so none replaces a default here."""
    return {**pod_security_context(), **(dict(template) if isinstance(template, Mapping) else {})}


def merged_container_context(template: object, executor: bool) -> dict[str, Any]:
    """A container's securityContext: ours with the template's on top, field by field, every
    capability dropped whatever the template drops (it may add NET_BIND_SERVICE back). The executor's
    also has a read-only root filesystem; a sidecar's or an init container's root stays as its image
    needs it (the restricted profile does not ask for it)."""
    ours = container_security_context()
    if not executor:
        del ours["readOnlyRootFilesystem"]
    theirs = dict(template) if isinstance(template, Mapping) else {}
    if theirs.get("privileged") is True:  # allowed by the install (--allow-privileged-pod-templates):
        del ours["allowPrivilegeEscalation"]  # the API server refuses it beside privileged
    capabilities = theirs.get("capabilities")
    capabilities = dict(capabilities) if isinstance(capabilities, Mapping) else {}
    dropped = [str(c) for c in capabilities.get("drop") or [] if str(c) != "ALL"]
    merged = {**ours, **theirs}
    merged["capabilities"] = {**capabilities, "drop": ["ALL", *dropped]}
    return merged
