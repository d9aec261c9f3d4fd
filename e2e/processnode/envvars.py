"""A container's environment and its ``$(VAR)`` expansion, resolved the way the kubelet does."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import Any

from processnode.loopback import PodAddresses

Json = dict[str, Any]
Reader = Callable[[str, str], Json]
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Replace ``$(NAME)`` with a defined variable, keep undefined references, turn ``$$`` into ``$``."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(substitute, text)


def field_value(pod: Json, path: str, addresses: PodAddresses) -> str:
    """Values of the downward API's ``fieldRef`` paths that a process can use."""
    meta = pod["metadata"]
    if path.startswith("metadata.labels['") or path.startswith("metadata.annotations['"):
        kind, key = path.split("['", 1)
        return str(meta.get(kind.split(".")[1], {}).get(key.rstrip("']"), ""))
    values = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": pod["spec"].get("nodeName", ""),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
        "status.podIP": addresses.pod_ip,
        "status.podIPs": addresses.pod_ip,
        "status.hostIP": addresses.node_ip,
        "status.hostIPs": addresses.node_ip,
    }
    if path not in values:
        raise ValueError(f"fieldRef {path!r} is not supported by the process node")
    return str(values[path])


def _secret_value(secret: Json, key: str) -> str:
    return base64.b64decode(secret.get("data", {})[key]).decode()


def container_env(
    pod: Json, container: Json, addresses: PodAddresses, read_config_map: Reader, read_secret: Reader
) -> dict[str, str]:
    """``envFrom`` then ``env`` (later entries win, ``$(VAR)`` sees earlier ones), like the kubelet."""
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            data = read_config_map(namespace, source["configMapRef"]["name"]).get("data", {})
            env.update({prefix + k: str(v) for k, v in data.items()})
        elif "secretRef" in source:
            secret = read_secret(namespace, source["secretRef"]["name"])
            env.update({prefix + k: _secret_value(secret, k) for k in secret.get("data", {})})
    for var in container.get("env", []):
        env[var["name"]] = _env_value(pod, var, env, addresses, read_config_map, read_secret)
    return env


def _env_value(
    pod: Json,
    var: Json,
    env: Mapping[str, str],
    addresses: PodAddresses,
    read_config_map: Reader,
    read_secret: Reader,
) -> str:
    if "valueFrom" not in var:
        return expand(str(var.get("value", "")), env)
    source = var["valueFrom"]
    namespace = pod["metadata"]["namespace"]
    if "fieldRef" in source:
        return field_value(pod, source["fieldRef"]["fieldPath"], addresses)
    if "configMapKeyRef" in source:
        ref = source["configMapKeyRef"]
        return str(read_config_map(namespace, ref["name"]).get("data", {})[ref["key"]])
    if "secretKeyRef" in source:
        ref = source["secretKeyRef"]
        return _secret_value(read_secret(namespace, ref["name"]), ref["key"])
    raise ValueError(f"env {var['name']}: valueFrom {sorted(source)} is not supported by the process node")
