"""emptyDir volumes without mount namespaces: a per-pod directory plus path rewriting.

The process node cannot mount anything at a container's ``mountPath``, so it gives each emptyDir
volume a directory under the pod's work dir and rewrites every command word, argument, env value and
``workingDir`` that is, or starts with, a mount path to point into that directory instead. A program
that learns its paths from its arguments or environment (``STREAMAPP_STATE_DIR=/var/lib/streamapp``)
thus writes into its own pod's volume, and two pods never share one. Paths hard-coded inside a
program are not rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

Json = dict[str, Any]


def emptydir_volumes(pod: Json, workdir: Path) -> dict[str, Path]:
    """Directory of each emptyDir volume of the pod (created; removed with the pod's work dir)."""
    directories = {}
    for volume in pod["spec"].get("volumes") or []:
        if "emptyDir" in volume:
            directory = workdir / "volumes" / volume["name"]
            directory.mkdir(parents=True, exist_ok=True)
            directories[volume["name"]] = directory
    return directories


def mount_table(container: Json, volumes: Mapping[str, Path]) -> dict[str, Path]:
    """mountPath → host directory for the container's mounts of emptyDir volumes (subPath honoured)."""
    table = {}
    for mount in container.get("volumeMounts") or []:
        if mount["name"] in volumes:
            table[mount["mountPath"].rstrip("/") or "/"] = volumes[mount["name"]] / mount.get("subPath", "")
    return table


def rewrite(value: str, table: Mapping[str, Path]) -> str:
    """Map a path inside a mount to the host directory; anything else is returned unchanged."""
    for mount_path in sorted(table, key=len, reverse=True):
        if value == mount_path:
            return str(table[mount_path])
        if value.startswith(mount_path + "/"):
            return str(table[mount_path] / value[len(mount_path) + 1 :])
    return value
