"""How the project's pods run: one restricted profile for the operator and the executors alike.

The image runs as an unprivileged user (`RUN_AS_USER`, no login shell, owns nothing outside its
writable volumes), so pods can hold the Kubernetes "restricted" Pod Security Standard: non-root, no
privilege escalation, every capability dropped, the runtime's default seccomp profile, and a
read-only root filesystem with `/tmp` (Spark's scratch space, the JVM's temp files) on an emptyDir.
"""

from __future__ import annotations

from typing import Any

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
