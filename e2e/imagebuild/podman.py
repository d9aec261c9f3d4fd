"""Every podman invocation goes through here, with the settings this kind of host needs.

Found on the development VM (cgroup v1 hybrid, root without CAP_SYS_RESOURCE):

- crun refuses to start any container ("cgroups in hybrid mode not supported"), even with
  ``--cgroups=disabled``; runc works, so runc is used whenever it is installed
  (``STREAMAPP_PODMAN_RUNTIME`` overrides).
- podman's default rlimits (nofile 1048576, a large nproc) exceed what the host lets it set
  ("setrlimit RLIMIT_NOFILE: Operation not permitted"); every run and build asks for limits no higher
  than the caller's own hard limits.
- The default storage (overlay), cgroup manager (cgroupfs), event logger (file) and bridge network
  work as configured, so they are left alone.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from collections.abc import Sequence

NOFILE_CAP = 65536
# RLIMIT_NPROC counts the container user's processes and JVM threads; values above ~32k were refused.
NPROC = 4096


class ToolMissing(RuntimeError):
    """podman (or mmdebstrap, for a cold base) is not installed: tests skip on a developer machine and
    fail under CI, where the suite installs them."""


def binary() -> str:
    """The podman executable (``$PODMAN`` overrides PATH)."""
    found = shutil.which(os.environ.get("PODMAN") or "podman")
    if not found:
        raise ToolMissing("podman is not installed (apt-get install podman runc mmdebstrap)")
    return found


def global_args() -> list[str]:
    """Options before the subcommand: the OCI runtime (see the module docstring)."""
    runtime = os.environ.get("STREAMAPP_PODMAN_RUNTIME") or ("runc" if shutil.which("runc") else "")
    return ["--runtime", runtime] if runtime else []


def ulimit_args() -> list[str]:
    """``--ulimit`` options within the caller's own hard limits (raising them needs CAP_SYS_RESOURCE)."""
    _, nofile_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    _, nproc_hard = resource.getrlimit(resource.RLIMIT_NPROC)
    nofile = NOFILE_CAP if nofile_hard == resource.RLIM_INFINITY else min(nofile_hard, NOFILE_CAP)
    nproc = NPROC if nproc_hard == resource.RLIM_INFINITY else min(nproc_hard, NPROC)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def command(*args: str) -> list[str]:
    """A full podman command line with the global options."""
    return [binary(), *global_args(), *args]


def run(
    args: Sequence[str], check: bool = True, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a short podman command, capturing its output; raises with stderr when ``check`` fails."""
    result = subprocess.run(command(*args), capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed (exit {result.returncode}):\n{result.stderr}")
    return result


def image_exists(reference: str) -> bool:
    """Whether a local image by that name exists (never looks at a registry)."""
    return run(["image", "exists", reference], check=False).returncode == 0


def image_info(reference: str) -> dict[str, object] | None:
    """``podman image inspect`` of a local image, or None when it does not exist."""
    result = run(["image", "inspect", reference], check=False)
    if result.returncode != 0:
        return None
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found[0] if found else None


def image_label(reference: str, label: str) -> str | None:
    """One label of a local image; None when the image or the label is missing."""
    info = image_info(reference)
    if info is None:
        return None
    labels = info.get("Labels") or {}
    assert isinstance(labels, dict)
    value = labels.get(label)
    return str(value) if value is not None else None


def image_size(reference: str) -> int:
    """Size in bytes of a local image (all layers, as ``podman images`` reports it)."""
    info = image_info(reference)
    if info is None:
        raise RuntimeError(f"no local image {reference}")
    size = info.get("Size")
    assert isinstance(size, int)
    return size
