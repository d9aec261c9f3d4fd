"""kopf registrations: indices fed by watches, and events that start, wake and stop app loops.

Nothing here decides anything: handlers only route what the watches see to the app's loop.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from streamapp.controller.loops import AppLoops, Key, Sources
from streamapp.controller.naming import APP_LABEL, APPS, GROUP, MEMBERS, VERSION

ZONE_LABEL = "topology.kubernetes.io/zone"


def register(registry: kopf.OperatorRegistry, loops: AppLoops, connection: kopf.ConnectionInfo) -> None:
    """Register every handler on `registry`, routing to `loops`; kopf logs in with `connection`.

    Handlers take kopf's keyword arguments as `**kwargs` (kopf passes many; each uses a few).
    """

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection

    @kopf.index("pods", labels={APP_LABEL: kopf.PRESENT}, registry=registry, id="member_pods")
    def member_pods(**kwargs: Any) -> dict[Key, Any]:
        return {(kwargs["namespace"], kwargs["labels"][APP_LABEL]): _plain(kwargs["body"])}

    @kopf.index(GROUP, VERSION, MEMBERS, registry=registry, id="app_members")
    def app_members(**kwargs: Any) -> dict[Key, Any]:
        return {(kwargs["namespace"], str(kwargs["spec"].get("app"))): _plain(kwargs["body"])}

    @kopf.index("nodes", registry=registry, id="node_zones")
    def node_zones(**kwargs: Any) -> dict[str, str] | None:
        zone = kwargs["labels"].get(ZONE_LABEL)
        return {kwargs["name"]: zone} if zone else None

    @kopf.on.event("pods", labels={APP_LABEL: kopf.PRESENT}, registry=registry)
    def pod_changed(**kwargs: Any) -> None:
        loops.wake((kwargs["namespace"], kwargs["labels"][APP_LABEL]))

    @kopf.on.event(GROUP, VERSION, MEMBERS, registry=registry)
    def member_changed(**kwargs: Any) -> None:
        loops.wake((kwargs["namespace"], str(kwargs["spec"].get("app"))))

    @kopf.on.event(GROUP, VERSION, APPS, registry=registry)
    async def app_changed(**kwargs: Any) -> None:
        key: Key = (kwargs["namespace"], kwargs["name"])
        if kwargs["type"] == "DELETED":
            await loops.stop(key)
            return
        pods: kopf.Index[Key, Any] = kwargs["member_pods"]
        members: kopf.Index[Key, Any] = kwargs["app_members"]
        zones: kopf.Index[str, str] = kwargs["node_zones"]
        sources = Sources(
            pods=lambda k: _values(pods, k),
            members=lambda k: _values(members, k),
            zones=lambda: {node: zone for node, found in zones.items() for zone in found},
        )
        loops.upsert(key, _plain(kwargs["body"]), sources)


def connection_info(configuration: Any) -> kopf.ConnectionInfo:
    """kopf's credentials from the client library's loaded configuration (one login for both)."""
    token = (configuration.api_key or {}).get("authorization", "")
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
        token=token.removeprefix("Bearer ") or None,
    )


def _values(index: kopf.Index[Key, Any], key: Key) -> Iterable[Any]:
    return list(index.get(key, []))


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    """A detached deep copy: index values and loop state must not change under the reader."""
    return copy.deepcopy(dict(body))
