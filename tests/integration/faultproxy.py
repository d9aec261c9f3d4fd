"""A fault proxy between a client (the operator) and the real API server.

It listens on plain HTTP on loopback and forwards every request to the API server over TLS with the
admin kubeconfig's client certificate, streaming responses (watches included) back as they come. A
test can then break one kind's watches the way an API server does after an outage: `cut` ends the
open watches of a resource and holds the client's reconnections; `gone` answers the held ones with
an ERROR event 410 Gone ("too old resource version"), so the client must list again. Between the two,
the test changes the cluster: whatever it deletes then reaches the client by no watch event. `delay`
holds every request of one method on a resource for a while before forwarding it: a slow API server.
`conflict` answers every request of one method on a resource with 409 Conflict, naming the object as
the API server does: another writer that always wins.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

GONE = (
    b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
    b'"message":"too old resource version","reason":"Expired","code":410}}\n'
)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}


@dataclass
class Gap:
    """A resource's watches cut and held until answered 410 Gone."""

    answered: asyncio.Event = field(default_factory=asyncio.Event)
    held: int = 0


class FaultProxy:
    """Run with `with FaultProxy(kubeconfig, tmp) as proxy:`; `proxy.kubeconfig` is the client's."""

    def __init__(self, upstream_kubeconfig: Path, directory: Path) -> None:
        config = yaml.safe_load(upstream_kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.upstream = str(cluster["server"]).rstrip("/")
        self.tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.tls.load_cert_chain(user["client-certificate"], user["client-key"])
        self.kubeconfig = directory / "proxied-kubeconfig"
        self.loop = asyncio.new_event_loop()
        self.upstreams: dict[str, set[aiohttp.ClientResponse]] = {}
        self.gaps: dict[str, Gap] = {}
        self.delays: dict[tuple[str, str], float] = {}
        self.conflicts: set[tuple[str, str]] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        port = self._call(self._start())
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "proxied", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                    "users": [{"name": "proxied", "user": {}}],
                    "contexts": [{"name": "proxied", "context": {"cluster": "proxied", "user": "proxied"}}],
                    "current-context": "proxied",
                }
            )
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def cut(self, plural: str) -> None:
        """End the open watches of `plural` and hold every new one until `gone`."""
        self._call(self._cut(plural))

    def held(self, plural: str) -> int:
        """How many watches of `plural` the proxy holds now."""
        gap = self.gaps.get(plural)
        return gap.held if gap else 0

    def gone(self, plural: str) -> None:
        """Answer the held watches of `plural` with 410 Gone; later ones pass again."""
        self._call(self._gone(plural))

    def delay(self, method: str, plural: str, seconds: float) -> None:
        """Hold each `method` request on `plural` for `seconds` before forwarding it."""
        self.delays[method, plural] = seconds

    def conflict(self, method: str, plural: str, on: bool = True) -> None:
        """Answer each `method` request on `plural` with 409 Conflict (`on`), or forward them again."""
        if on:
            self.conflicts.add((method, plural))
        else:
            self.conflicts.discard((method, plural))

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)

    async def _start(self) -> int:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.tls), timeout=aiohttp.ClientTimeout(total=None)
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._forward)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _stop(self) -> None:
        for gap in self.gaps.values():
            gap.answered.set()
        for upstreams in self.upstreams.values():
            for upstream in list(upstreams):
                upstream.close()  # open watches end, so the server's cleanup need not wait for them
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _cut(self, plural: str) -> None:
        self.gaps[plural] = Gap()
        for upstream in list(self.upstreams.get(plural, ())):
            if upstream.url.query.get("watch") in ("true", "1"):
                upstream.close()

    async def _gone(self, plural: str) -> None:
        gap = self.gaps.pop(plural)
        gap.answered.set()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        plural = resource(request.path)
        watch = request.query.get("watch") in ("true", "1")
        gap = self.gaps.get(plural) if watch else None
        if gap is not None:
            gap.held += 1
            try:
                await gap.answered.wait()
            finally:
                gap.held -= 1
            gone = web.StreamResponse(headers={"Content-Type": "application/json"})
            await gone.prepare(request)
            await gone.write(GONE)
            await gone.write_eof()
            return gone
        await asyncio.sleep(self.delays.get((request.method, plural), 0.0))
        if (request.method, plural) in self.conflicts:
            return conflict(request.path, plural)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        async with self._session.request(
            request.method,
            self.upstream + request.rel_url.raw_path_qs,
            headers=headers,
            data=await request.read() if request.can_read_body else None,
            allow_redirects=False,
            skip_auto_headers=("Content-Type",),  # the client sends none on some calls: forward none
            auto_decompress=False,
        ) as upstream:
            response = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP},
            )
            await response.prepare(request)
            with (
                self._tracked(plural, upstream),
                contextlib.suppress(aiohttp.ClientError, ConnectionError),
            ):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
            return response

    @contextlib.contextmanager
    def _tracked(self, plural: str, upstream: aiohttp.ClientResponse) -> Iterator[None]:
        self.upstreams.setdefault(plural, set()).add(upstream)
        try:
            yield
        finally:
            self.upstreams[plural].discard(upstream)


def resource(path: str) -> str:
    """The resource (plural) a request path names: /api/v1/namespaces/ns/pods/name -> pods."""
    parts = path.strip("/").split("/")
    at = 2 if parts[0] == "api" else 3
    if len(parts) > at + 2 and parts[at] == "namespaces":
        at += 2
    return parts[at] if len(parts) > at else ""


def conflict(path: str, plural: str) -> web.Response:
    """409 Conflict for the object at `path`, as the API server words it."""
    parts = path.strip("/").split("/")
    name, group = parts[-1], (parts[1] if parts[0] == "apis" else "")
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'Operation cannot be fulfilled on {plural}.{group} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            "reason": "Conflict",
            "details": {"name": name, "group": group, "kind": plural},
            "code": 409,
        },
        status=409,
    )
