"""The kubelet's ``/containerLogs`` endpoint, so ``kubectl logs`` works for process-node pods.

kube-apiserver proxies ``pods/log`` to the node's ``daemonEndpoints.kubeletEndpoint`` on its
InternalIP over TLS, authenticating with its kubelet client certificate; this server requires a client
certificate signed by the cluster CA and serves the container's log file (all restarts appended).
Supported query parameters: ``tailLines``, ``limitBytes`` and ``follow``.
"""

from __future__ import annotations

import http.server
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LogResolver = Callable[[str, str, str], Path | None]
FOLLOW_POLL_S = 0.2


@dataclass(frozen=True)
class TlsFiles:
    """Serving certificate/key of the node and the CA that signs apiserver's client certificate."""

    cert: Path
    key: Path
    client_ca: Path


def tail(data: bytes, lines: int | None) -> bytes:
    """The last ``lines`` lines of ``data`` (all of it when ``lines`` is None)."""
    if lines is None:
        return data
    if lines <= 0:
        return b""
    return b"".join(data.splitlines(keepends=True)[-lines:])


class _Handler(http.server.BaseHTTPRequestHandler):
    resolve: LogResolver

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if len(parts) != 4 or parts[0] != "containerLogs":
            self.send_error(404, "only /containerLogs/<namespace>/<pod>/<container> is served")
            return
        namespace, pod, container = parts[1:]
        log = self.resolve(namespace, pod, container)
        if log is None:
            self.send_error(404, f"container {container} of pod {namespace}/{pod} is not on this node")
            return
        query = urllib.parse.parse_qs(url.query)
        tail_lines = int(query["tailLines"][0]) if "tailLines" in query else None
        limit = int(query["limitBytes"][0]) if "limitBytes" in query else None
        data = tail(log.read_bytes() if log.exists() else b"", tail_lines)
        data = data[:limit] if limit is not None else data
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(data)
        if query.get("follow", ["false"])[0] == "true":
            self._follow(namespace, pod, container, log, log.stat().st_size if log.exists() else 0)

    def _follow(self, namespace: str, pod: str, container: str, log: Path, offset: int) -> None:
        """Stream appended output until the container is gone from this node or the client leaves."""
        try:
            while self.resolve(namespace, pod, container) is not None:
                size = log.stat().st_size if log.exists() else 0
                if size > offset:
                    with log.open("rb") as handle:
                        handle.seek(offset)
                        self.wfile.write(handle.read(size - offset))
                    self.wfile.flush()
                    offset = size
                time.sleep(FOLLOW_POLL_S)
        except (BrokenPipeError, ConnectionResetError):
            return

    def log_message(self, format: str, *args: object) -> None:
        """Requests are not logged; the agent's log is for pod lifecycle events."""


def serve(port: int, tls: TlsFiles, resolve: LogResolver) -> http.server.ThreadingHTTPServer:
    """Start the HTTPS log server on 127.0.0.1:``port`` in a daemon thread."""
    handler = type("LogHandler", (_Handler,), {"resolve": staticmethod(resolve)})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls.cert, tls.key)
    context.load_verify_locations(tls.client_ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="log-server", daemon=True).start()
    return server
