"""emptyDir and claim volumes without mount namespaces: a host directory plus path rewriting.

The process node cannot mount anything at a container's ``mountPath``, so each volume is a host
directory and every command word, argument, env value and ``workingDir`` that is, or starts with, a
mount path is rewritten to point into that directory instead. A program that learns its paths from its
arguments or environment (``STREAMAPP_STATE_DIR=/var/lib/streamapp``) thus writes into the volume.
Paths hard-coded inside a program are not rewritten. An env value holding JSON (the operator passes a
pipeline that way) has each string inside rewritten, and a ``file://`` URI counts as its path.
A mount at ``/tmp`` is not emulated: the host's ``/tmp`` already is scratch space every process can
use, and emulating it would redirect any host path under ``/tmp`` that a test hands to a pod.

An emptyDir is a directory under the pod's work dir, so two pods never share one. A
persistentVolumeClaim resolves to its bound PV's ``hostPath`` (what the local cluster's provisioner
creates) or ``local`` path: every pod on this machine sees the same directory, so ReadWriteMany is real.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Json = dict[str, Any]
ClaimReader = Callable[[str, str], Json | None]  # (namespace, name) -> PVC, None if absent
VolumeReader = Callable[[str], Json | None]  # name -> PV, None if absent
HOST_SCRATCH = "/tmp"
FILE_URI = "file://"


def emptydir_volumes(pod: Json, workdir: Path) -> dict[str, Path]:
    """Directory of each emptyDir volume of the pod (created; removed with the pod's work dir)."""
    directories = {}
    for volume in pod["spec"].get("volumes") or []:
        if "emptyDir" in volume:
            directory = workdir / "volumes" / volume["name"]
            directory.mkdir(parents=True, exist_ok=True)
            directories[volume["name"]] = directory
    return directories


def _claims(pod: Json) -> dict[str, str]:
    """Volume name → claim name of the pod's persistentVolumeClaim volumes."""
    return {
        volume["name"]: volume["persistentVolumeClaim"]["claimName"]
        for volume in pod["spec"].get("volumes") or []
        if "persistentVolumeClaim" in volume
    }


def unbound_claim(pod: Json, read_claim: ClaimReader) -> str | None:
    """The first claim of the pod that is missing or not Bound yet, else None.

    A kubelet does not start containers before their volumes are mounted; the process node likewise
    leaves such a pod Pending and looks again on its next pass.
    """
    namespace = pod["metadata"]["namespace"]
    for claim_name in _claims(pod).values():
        claim = read_claim(namespace, claim_name)
        if claim is None or claim.get("status", {}).get("phase") != "Bound":
            return claim_name
    return None


def claim_volumes(pod: Json, read_claim: ClaimReader, read_volume: VolumeReader) -> dict[str, Path]:
    """Directory of each claim volume: claim → bound PV → its hostPath/local path.

    Raises ValueError for a claim that is not bound (call :func:`unbound_claim` first) or a PV whose
    source is not a directory on this machine (NFS, CSI, ...): the pod cannot run here.
    """
    namespace = pod["metadata"]["namespace"]
    directories = {}
    for volume_name, claim_name in _claims(pod).items():
        claim = read_claim(namespace, claim_name)
        pv_name = (claim or {}).get("spec", {}).get("volumeName")
        pv = read_volume(pv_name) if pv_name else None
        if pv is None:
            raise ValueError(f"claim {claim_name} is not bound to a PersistentVolume")
        source = pv["spec"].get("hostPath") or pv["spec"].get("local")
        if source is None:
            raise ValueError(f"PV {pv_name} of claim {claim_name} is neither hostPath nor local")
        directories[volume_name] = Path(source["path"])
    return directories


def mount_table(container: Json, volumes: Mapping[str, Path]) -> dict[str, Path]:
    """mountPath → host directory for the container's mounts of emulated volumes (subPath honoured)."""
    table = {}
    for mount in container.get("volumeMounts") or []:
        path = mount["mountPath"].rstrip("/") or "/"
        if mount["name"] in volumes and path != HOST_SCRATCH:
            table[path] = volumes[mount["name"]] / mount.get("subPath", "")
    return table


def rewrite_env(value: str, table: Mapping[str, Path]) -> str:
    """`rewrite` for an env value, which may also be a JSON document of paths and URIs."""
    if value[:1] in ("{", "["):
        try:
            document = json.loads(value)
        except ValueError:
            return rewrite(value, table)
        return json.dumps(_rewrite_strings(document, table))
    return rewrite(value, table)


def _rewrite_strings(node: Any, table: Mapping[str, Path]) -> Any:
    if isinstance(node, str):
        return rewrite(node, table)
    if isinstance(node, list):
        return [_rewrite_strings(item, table) for item in node]
    if isinstance(node, dict):
        return {key: _rewrite_strings(item, table) for key, item in node.items()}
    return node


def rewrite(value: str, table: Mapping[str, Path]) -> str:
    """Map a path (or `file://` URI) inside a mount to the host directory; anything else is returned
    unchanged."""
    if value.startswith(FILE_URI + "/"):
        return FILE_URI + rewrite(value[len(FILE_URI) :], table)
    for mount_path in sorted(table, key=len, reverse=True):
        if value == mount_path:
            return str(table[mount_path])
        if value.startswith(mount_path + "/"):
            return str(table[mount_path] / value[len(mount_path) + 1 :])
    return value
