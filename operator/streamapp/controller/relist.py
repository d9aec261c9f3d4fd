"""Ghosts after a relist: children and apps that kopf still holds though they are gone.

When a watch answers 410 Gone (its resourceVersion compacted away, as after an API-server outage),
kopf lists the kind again and watches on from the list's version (`continuous_watch` in kopf's
`_cogs/clients/watching.py`). Its indices drop an entry only on a DELETED event, and an object deleted
between the lost watch and the new list sends none: it stays indexed for good (a deleted member pod is
then never re-created) and the loop of an app deleted in that gap runs on. kopf 1.45 has no hook for
this: the `Bookmark.LISTED` it yields after each listing only unblocks its readiness, and its indices
offer no way to drop an entry. What it does show is the listing itself: listed objects arrive as
events of type None. So:

- `Relists` notices a re-listing: a type-None event for an object (uid) this kind already delivered
  (the first listing delivers each object once), and asks for a sweep;
- a sweep notes what is indexed, then lists every indexed kind (metadata only, the watches' label
  selector) and the apps, and takes as gone whatever was indexed before the list began and is absent
  from it. That is sound at any moment: a list is a consistent read newer than anything indexed before
  it, and a uid never comes back. Gone children are left out of what the loops read (`present`) and
  their apps are woken; a gone app's loop is stopped, as its DELETED event would have.

The sweep only runs on a re-listing, so the LIST calls cost nothing in steady state. A kind's relist
that finds no object of that kind at all sends no event and so asks for no sweep by itself; any other
kind's relist (the apps' always has objects while an app exists) sweeps every kind.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from kubernetes import client

log = logging.getLogger(__name__)
Body = Mapping[str, Any]
Key = tuple[str, str]
METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def uid_of(body: Body) -> str:
    return str((body.get("metadata") or {}).get("uid", ""))


@dataclass
class Listings:
    """Per kind, the uids its watch delivered: a listed (type None) event for one already delivered
    means kopf is listing that kind again."""

    delivered: dict[str, set[str]] = field(default_factory=dict)

    def listed_again(self, kind: str, event: str | None, body: Body) -> bool:
        uid = uid_of(body)
        delivered = self.delivered.setdefault(kind, set())
        if event == "DELETED":
            delivered.discard(uid)
            return False
        again = event is None and uid in delivered
        delivered.add(uid)
        return again


def ghosts(indexed: Iterable[str], listed: Iterable[str]) -> frozenset[str]:
    """The uids indexed before a list began that the list no longer holds: deleted meanwhile."""
    return frozenset(indexed) - frozenset(listed)


def gone_apps(running: Mapping[Key, Body], listed: Iterable[Body]) -> list[Key]:
    """The apps whose loops ran before a list began and that the list no longer names."""
    names = {(str(meta.get("namespace", "")), str(meta.get("name", ""))) for meta in _metadata(listed)}
    return [key for key in running if key not in names]


def _metadata(bodies: Iterable[Body]) -> Iterable[Mapping[str, Any]]:
    return (body.get("metadata") or {} for body in bodies)


def _indexed(index: Mapping[Any, Iterable[Body]]) -> dict[str, Body]:
    return {uid_of(body): body for key in list(index) for body in list(index[key])}


@dataclass(frozen=True)
class Lister:
    """Metadata-only LIST calls for the sweep, in the operator's namespaces (none: cluster-wide)."""

    api: client.ApiClient
    namespaces: tuple[str, ...]

    def items(self, api_version: str, plural: str, label_selector: str | None) -> list[Body]:
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        paths = [f"{prefix}/namespaces/{ns}/{plural}" for ns in self.namespaces] or [f"{prefix}/{plural}"]
        query = [("labelSelector", label_selector)] if label_selector else []
        found: list[Body] = []
        for path in paths:
            method, url, headers, _, _ = self.api.param_serialize(
                "GET",
                path,
                query_params=query,
                header_params={"Accept": METADATA_ONLY},
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(method, url, header_params=headers)
            response.read()  # type: ignore[no-untyped-call]
            listed = cast(Body, self.api.response_deserialize(response, {"200": "object"}).data)  # or raises
            found.extend(listed.get("items") or [])
        return found


@dataclass(frozen=True)
class Kind:
    """An indexed kind: where to list it and the kopf index that holds it."""

    api_version: str
    plural: str
    index_id: str


@dataclass
class Relists:
    """Sweeps after kopf re-lists a kind, and what they found gone (see the module docstring)."""

    lister: Lister
    kinds: tuple[Kind, ...]
    apps: Kind
    label_selector: str
    wake: Callable[[Body], None]
    running_apps: Callable[[], Mapping[Key, Body]]
    stop_app: Callable[[Key], Awaitable[None]]
    loop: asyncio.AbstractEventLoop
    listings: Listings = field(default_factory=Listings)
    gone: dict[str, frozenset[str]] = field(default_factory=dict)
    _pending: bool = False
    _sweeping: asyncio.Task[None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, kind: str, kwargs: Mapping[str, Any]) -> None:
        """An event of `kind` as kopf's handler got it (its indices among the kwargs); from any
        thread (kopf runs sync handlers on its executor's)."""
        with self._lock:
            again = self.listings.listed_again(kind, kwargs["type"], kwargs["body"])
        if again:
            indices = {k.index_id: kwargs[k.index_id] for k in self.kinds}
            self.loop.call_soon_threadsafe(self._request, indices)

    def present(self, bodies: Iterable[Body]) -> list[Body]:
        """`bodies` without those a sweep found gone."""
        gone = set().union(*self.gone.values()) if self.gone else set()
        return [body for body in bodies if uid_of(body) not in gone]

    def _request(self, indices: Mapping[str, Mapping[Any, Iterable[Body]]]) -> None:
        """One sweep at a time; requests during one make one more after it (on the event loop)."""
        if self._sweeping is not None and not self._sweeping.done():
            self._pending = True
            return
        self._sweeping = asyncio.create_task(self._sweep_while_asked(indices), name="relist sweep")

    async def _sweep_while_asked(self, indices: Mapping[str, Mapping[Any, Iterable[Body]]]) -> None:
        while True:
            self._pending = False
            try:
                await self.sweep(indices)
            except Exception:
                log.exception("sweep after a relist failed")  # the next relist sweeps again
            if not self._pending:
                return

    async def sweep(self, indices: Mapping[str, Mapping[Any, Iterable[Body]]]) -> None:
        for kind in self.kinds:
            indexed = _indexed(indices[kind.index_id])
            listed = await asyncio.to_thread(
                self.lister.items, kind.api_version, kind.plural, self.label_selector
            )
            found = ghosts(indexed, map(uid_of, listed))
            if found:
                log.warning("%d %s gone while kopf's watch was away: dropped", len(found), kind.plural)
            self.gone[kind.plural] = found
            for uid in found:
                self.wake(indexed[uid])
        running = dict(self.running_apps())
        listed = await asyncio.to_thread(self.lister.items, self.apps.api_version, self.apps.plural, None)
        for key in gone_apps(running, listed):
            if uid_of(self.running_apps().get(key) or {}) == uid_of(running[key]):  # not re-created since
                log.warning("app %s/%s gone while kopf's watch was away: stopping its loop", *key)
                await self.stop_app(key)
