"""The operator's HTTP endpoints on `--metrics-port`: `/metrics` for Prometheus, `/healthz` for the
liveness and readiness probes (`controller.health`), served by threads of their own in every replica."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from streamapp.controller.health import Health

HEALTHZ = "/healthz"


class _Server(ThreadingMixIn, WSGIServer):
    """One thread a request: a slow scrape does not hold up a probe."""

    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    """No access log: a probe every 10 s and a scrape every 15 s would fill the operator's log."""

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


def serve(port: int, address: str, registry: CollectorRegistry, health: Health) -> WSGIServer:
    """Serve both endpoints on `address:port` until the process ends; returns the server."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != HEALTHZ:
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        problem = health.problem()
        body = f"{problem or 'ok'}\n".encode()
        status = "200 OK" if problem is None else "503 Service Unavailable"
        start_response(
            status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
        )
        return [body]

    # IPv4 or IPv6, as the address is (in a pod: its IP, which may be either).
    family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0][0]
    server_class: type[_Server] = type("_Server", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(address, port, app, server_class=server_class, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="endpoints", daemon=True).start()
    return server
