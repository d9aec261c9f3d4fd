"""The member's HTTP endpoints: readiness, liveness and Prometheus metrics on the pod's IP."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    generate_latest,
)


class _Server(ThreadingHTTPServer):
    """Serves each request on a thread of its own, and says nothing of a client that left before its
    answer: a probe whose timeout passed on a loaded node closes the connection, and the traceback
    `socketserver` printed for the broken pipe (seen in a bench run's executor logs) reported no fault."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def serve(
    address: str, port: int, registry: CollectorRegistry, following: Callable[[], bool]
) -> ThreadingHTTPServer:
    """Readiness, liveness and Prometheus metrics, on the pod's IP: that is where the kubelet probes
    and Prometheus scrapes, and nothing else listens.

    Both probes need the process up and Spark started (nothing is served before). `/readyz` also needs
    the member to be `following` its target (the membership watch heard from the API server lately):
    a member deaf to its target must not count as alive, or its tasks would wait on it. `/healthz`
    does not: a restart would not bring the API server back, it would only make every task restore.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/readyz" and not following():
                self.send_error(503, "not following the member's target (API server unreachable)")
                return
            if self.path in ("/readyz", "/healthz"):
                body, kind = b"ok", "text/plain"
            elif self.path == "/metrics":
                body, kind = generate_latest(registry), "text/plain; version=0.0.4"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

    server = _Server((address, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    return server
