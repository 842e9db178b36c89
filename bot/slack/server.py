"""The HTTP server for Slack's requests: Bolt's WSGI adapter on a threaded stdlib server.

Events, slash commands and interactivity all arrive as POST /slack/events. For probes:
GET /healthz answers 200 while the process serves; GET /readyz answers 200 once citebot
can answer (store reachable and stamped for this model, model loaded, Redis answering
when configured) and 503 with the failing checks otherwise. One thread per connection;
the slow work never runs here (the Slack adapter acks and hands it to its worker pool),
so a thread lives for milliseconds.

Before Bolt sees a request to /slack/events, `guarded` checks it in this order, so a
forged or oversized request costs no parsing: a body over MAX_BODY_BYTES is refused
with 413 from its Content-Length, unread (and what still arrives is discarded, bounded, so
the client reads the 413 instead of a reset connection); the body is read (exactly Content-Length
bytes); the signature (v0 HMAC of timestamp and raw body, five minutes' tolerance) is
checked, 401 if it fails; the signed body's shape is checked (bot.slack.shape: an object
with a string `type`, an `event` that is an object, ...), 400 if it is not Slack's; only
then does Bolt parse it, and a signed body Bolt still cannot parse gets 400, never 500.
"""

from __future__ import annotations

import io
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk.signature import SignatureVerifier

from bot.metrics import exposition
from bot.slack import shape
from search.errors import ConfigError

log = structlog.get_logger("citebot.server")

EVENTS_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
# A client that sends nothing for this long is dropped, so idle sockets cannot pile up.
REQUEST_TIMEOUT_S = 10
# Slack's largest requests are block_actions payloads carrying the whole message: at most
# 50 blocks of 3,000 characters (Slack's limits), 150 KB, or 900 KB if every character
# were JSON-escaped as \uXXXX. Anything larger is not Slack's and is refused unread.
MAX_BODY_BYTES = 1 << 20
# A body refused unread is still arriving when the answer is sent; closing on it would reset
# the connection and the client could lose the 413. Discard at most this much, for at most
# this long, after the answer (a lingering close, as HTTP servers do), then close.
LINGER_BYTES = 4 * MAX_BODY_BYTES
LINGER_S = 2.0
LINGER_IDLE_S = 0.5
UNREAD_KEY = "citebot.body_unread"  # set by `guarded` when it answers without reading the body

# Readiness: each check's name -> "ok" or what is wrong.
Readiness = Callable[[], dict[str, str]]
WsgiApp = Callable[..., Iterable[bytes]]
Middleware = Callable[[WsgiApp], WsgiApp]  # e.g. the /admin pages (bot/admin/app.py)


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def _linger(sock: socket.socket) -> None:
    """Half-close after the answer, then discard what the client is still sending (bounded)."""
    try:
        sock.shutdown(socket.SHUT_WR)
        end = time.monotonic() + LINGER_S
        discarded = 0
        while discarded < LINGER_BYTES and time.monotonic() < end:
            readable, _, _ = select.select([sock], [], [], LINGER_IDLE_S)
            chunk = sock.recv(65536) if readable else b""
            if not chunk:
                return  # the client closed its side, or stopped sending
            discarded += len(chunk)
    except OSError:  # the client already went away
        pass


class _RequestHandler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib signature
        """No access log: each request's outcome is logged by its handler (Bolt logs refusals)."""

    def get_environ(self) -> dict:
        return {**super().get_environ(), UNREAD_KEY: self._unread}

    def handle(self) -> None:
        self._unread: list[bool] = []
        super().handle()
        if self._unread:  # answered before the body arrived: see LINGER_BYTES
            self.wfile.flush()
            _linger(self.connection)


def _not_found(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
    return [b"not found"]


def probes(readiness: Readiness | None, inner: WsgiApp = _not_found) -> WsgiApp:
    """/healthz, /readyz and /metrics in front of another WSGI application."""

    def application(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO")
        if environ.get("REQUEST_METHOD") == "GET" and path == HEALTH_PATH:
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"ok"]
        if environ.get("REQUEST_METHOD") == "GET" and path == METRICS_PATH:
            body, content_type = exposition()
            start_response("200 OK", [("Content-Type", content_type)])
            return [body]
        if environ.get("REQUEST_METHOD") == "GET" and path == READY_PATH:
            try:
                checks = readiness() if readiness is not None else {}
            except Exception as exc:  # noqa: BLE001 - a probe answers, it never raises
                checks = {"readiness": f"{type(exc).__name__}: {exc}"}
            ready = all(v == "ok" for v in checks.values())
            body = json.dumps({"ready": ready, "checks": checks}).encode()
            start_response("200 OK" if ready else "503 Service Unavailable", [("Content-Type", "application/json")])
            return [body]
        return inner(environ, start_response)

    return application


def _plain(start_response: Callable[..., Any], status: str, text: str) -> Iterable[bytes]:
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [text.encode()]


def _signed(verifier: SignatureVerifier, environ: dict, body: bytes) -> bool:
    timestamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP") or ""
    signature = environ.get("HTTP_X_SLACK_SIGNATURE") or ""
    if not timestamp.isascii() or not timestamp.isdigit() or not signature:
        return False
    try:
        return verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
    except (UnicodeDecodeError, ValueError, OverflowError):  # not text: Slack signs UTF-8 JSON or forms
        return False


def guarded(
    inner: WsgiApp, signing_secret: str, path: str = EVENTS_PATH, max_body_bytes: int = MAX_BODY_BYTES
) -> WsgiApp:
    """Size limit and signature before `inner` (Bolt) parses anything; see the module docstring."""
    verifier = SignatureVerifier(signing_secret)

    def application(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") != path:
            return inner(environ, start_response)
        length = (environ.get("CONTENT_LENGTH") or "").strip()
        if not length.isascii() or not length.isdigit():
            log.info("slack_request_refused", reason="no Content-Length", status=411)
            environ.get(UNREAD_KEY, []).append(True)
            return _plain(start_response, "411 Length Required", "Content-Length required")
        if int(length) > max_body_bytes:
            log.info("slack_request_refused", reason="body too large", status=413, bytes=int(length))
            environ.get(UNREAD_KEY, []).append(True)
            return _plain(start_response, "413 Content Too Large", f"body over {max_body_bytes} bytes")
        try:
            body = environ["wsgi.input"].read(int(length)) if int(length) else b""
        except OSError:  # the client went away or stalled past REQUEST_TIMEOUT_S
            return _plain(start_response, "400 Bad Request", "body not received")
        if len(body) != int(length) or not _signed(verifier, environ, body):
            log.info("slack_request_refused", reason="signature", status=401)
            return _plain(start_response, "401 Unauthorized", "invalid request signature")
        malformed = shape.problem(body, environ.get("CONTENT_TYPE"))
        if malformed:
            log.warning(
                "slack_request_malformed", problem=malformed[:300], status=400, content_type=environ.get("CONTENT_TYPE")
            )
            return _plain(start_response, "400 Bad Request", f"not a Slack request body: {malformed}")
        environ = {**environ, "wsgi.input": io.BytesIO(body)}
        started: list[str] = []

        def recording(status: str, headers: list, exc_info: Any = None) -> Callable[..., Any]:
            started.append(status)
            return start_response(status, headers, exc_info)

        try:
            return inner(environ, recording)
        except Exception as exc:  # a signed body Bolt cannot parse
            if started:
                raise
            log.warning(
                "slack_request_unparsable",
                error=f"{type(exc).__name__}: {exc}"[:300],
                content_type=environ.get("CONTENT_TYPE"),
            )
            return _plain(start_response, "400 Bad Request", "unreadable request body")

    return application


def wsgi_app(
    app: App,
    signing_secret: str,
    path: str = EVENTS_PATH,
    readiness: Readiness | None = None,
    admin: Middleware | None = None,
) -> WsgiApp:
    """Bolt's WSGI handler behind the size and signature guard, plus the probes (and /admin,
    bot/admin/, when given); usable under any WSGI server. The secret is the one the Bolt
    app was built with (passed in explicitly: Bolt's own copy is private)."""
    slack = guarded(SlackRequestHandler(app, path=path), signing_secret, path)
    return probes(readiness, admin(slack) if admin else slack)


class _Server:
    """Serves a WSGI app on host:port (port 0 picks a free one; `.port` tells which)."""

    LISTENING_EVENT = "http_listening"

    def __init__(self, application: WsgiApp, *, host: str, port: int, path: str = "") -> None:
        try:
            self._server = make_server(
                host, port, application, server_class=_ThreadingWSGIServer, handler_class=_RequestHandler
            )
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port} ({exc}); pick another port") from exc
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
        log.info(self.LISTENING_EVENT, host=self.host, port=self.port, path=self.path)
        self._server.serve_forever(poll_interval=0.2)

    def start(self):
        """Serve on a background thread (tests, benchmarks, the Socket Mode probe port)."""
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


class SlackHttpServer(_Server):
    """Slack's requests at `path`, and the probes."""

    LISTENING_EVENT = "slack_http_listening"

    def __init__(
        self,
        app: App,
        *,
        signing_secret: str,
        host: str = "0.0.0.0",
        port: int = 3000,
        path: str = EVENTS_PATH,
        readiness: Readiness | None = None,
        admin: Middleware | None = None,
    ) -> None:
        super().__init__(wsgi_app(app, signing_secret, path, readiness, admin), host=host, port=port, path=path)


class ProbeServer(_Server):
    """Only the probes (Socket Mode has no HTTP server of its own)."""

    LISTENING_EVENT = "probe_http_listening"

    def __init__(
        self,
        *,
        host: str = "0.0.0.0",
        port: int = 9091,
        readiness: Readiness | None = None,
        admin: Middleware | None = None,
    ) -> None:
        super().__init__(probes(readiness, admin(_not_found) if admin else _not_found), host=host, port=port)
