"""An HTTP proxy in front of an Elasticsearch node that fires a fault at a chosen request.

The fault suite points citebot at the proxy (CITEBOT_ES_URL) and arms it: "when the 2nd
`_bulk` request arrives, SIGKILL the node, then forward it" lands the kill at a known
point of an ingest (while documents are written, while the old index is copied, just
before the alias moves) or of a turn (its first search). Everything else is forwarded
unchanged; when the node is gone the client's connection is closed without an answer,
as a dead node's would be refused or reset.

    proxy = ElasticProxy(es.port).start()
    proxy.arm(lambda r: r.method == "POST" and r.path.startswith("/_aliases"), es.kill)
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
UPSTREAM_TIMEOUT_S = 120


@dataclass(frozen=True)
class ProxiedRequest:
    method: str
    path: str
    body: bytes


class ElasticProxy:
    """Forwards 127.0.0.1:<port> to the node on `upstream_port`; see the module docstring."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.requests: list[ProxiedRequest] = []
        self.fired: list[ProxiedRequest] = []
        self._armed: list[tuple[Callable[[ProxiedRequest], bool], Callable[[], None], int]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _any(self) -> None:
                proxy._handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="es-proxy")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ElasticProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def arm(self, match: Callable[[ProxiedRequest], bool], action: Callable[[], None], nth: int = 1) -> None:
        """Run `action` (before forwarding) at the nth request `match` accepts; once."""
        with self._lock:
            self._armed.append((match, action, nth))

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()

    def _fire(self, request: ProxiedRequest) -> None:
        actions = []
        with self._lock:
            self.requests.append(request)
            keep = []
            for match, action, nth in self._armed:
                if match(request):
                    nth -= 1
                    if nth == 0:
                        actions.append(action)
                        self.fired.append(request)
                        continue
                keep.append((match, action, nth))
            self._armed = keep
        for action in actions:
            action()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        request = ProxiedRequest(handler.command, handler.path, body)
        self._fire(request)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_HEADERS}
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=UPSTREAM_TIMEOUT_S)
        try:
            upstream.request(handler.command, handler.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
            reply_headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_HEADERS]
        except OSError:  # the node is gone: no answer, the connection just closes
            handler.close_connection = True
            return
        finally:
            upstream.close()
        try:
            handler.send_response(response.status, response.reason)
            for k, v in reply_headers:
                handler.send_header(k, v)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(payload)
        except OSError:
            handler.close_connection = True
