"""The HTTP server for Slack's requests: Bolt's WSGI adapter on a threaded stdlib server.

Events, slash commands and interactivity all arrive as POST /slack/events; GET /healthz
answers 200 for probes. One thread per connection; the slow work never runs here (the
Slack adapter acks and hands it to its worker pool), so a thread lives for milliseconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler

from search.errors import ConfigError

log = structlog.get_logger("citebot.server")

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
# A client that sends nothing for this long is dropped, so idle sockets cannot pile up.
REQUEST_TIMEOUT_S = 10


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class _RequestHandler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib signature
        """No access log: each request's outcome is logged by its handler (Bolt logs refusals)."""


def wsgi_app(app: App, path: str = EVENTS_PATH) -> Callable[..., Iterable[bytes]]:
    """Bolt's WSGI handler plus a health check; usable under any WSGI server."""
    slack = SlackRequestHandler(app, path=path)

    def application(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") == "GET" and environ.get("PATH_INFO") == HEALTH_PATH:
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"ok"]
        return slack(environ, start_response)

    return application


class SlackHttpServer:
    """Serves a Bolt app on host:port (port 0 picks a free one; `.port` tells which)."""

    def __init__(self, app: App, *, host: str = "0.0.0.0", port: int = 3000,
                 path: str = EVENTS_PATH) -> None:
        try:
            self._server = make_server(host, port, wsgi_app(app, path),
                                       server_class=_ThreadingWSGIServer, handler_class=_RequestHandler)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port} ({exc}); pick another --port") from exc
        self.host = host
        self.path = path
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}{self.path}"

    def serve_forever(self) -> None:
        log.info("slack_http_listening", host=self.host, port=self.port, path=self.path)
        self._server.serve_forever(poll_interval=0.2)

    def start(self) -> SlackHttpServer:
        """Serve on a background thread (tests, benchmarks)."""
        self._thread = threading.Thread(target=self.serve_forever, name="citebot-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Make serve_forever return (call from another thread, e.g. a signal handler's)."""
        self._server.shutdown()

    def close(self) -> None:
        self._server.server_close()

    def shutdown(self) -> None:
        """Stop a server started with `start()` and release its port."""
        self.stop()
        self.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
