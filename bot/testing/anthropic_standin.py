"""A local stand-in for the Anthropic Messages API, spoken to through the real SDK.

A stdlib threaded HTTP server on 127.0.0.1, port 0. Each test scripts what POST
/v1/messages answers: a queue of replies consumed in order (a reply may be a function
of the request, so a scripted "model" can read the passages it was given), routes that
answer matching requests without consuming the queue, and an optional standing reply
for when the queue is empty. Every request is recorded with its arrival time.

Transport faults (benchmarks/faults.py and tests/test_faults_anthropic.py): a reply may
also reset the connection instead of answering (`reset()`), send its headers and then
its body a byte at a time (`drip()`: every read returns within the client's timeout, so
only a deadline on the whole attempt ends it), send half its body and close (`truncated()`),
or never answer at all (`stall()`).

A request with `"stream": true` (the SDK's messages.stream) gets a scripted 200 message as
server-sent events, the way the API streams it: message_start, one text block in deltas of
`Reply.chunk_chars` characters, message_delta with the stop reason and usage, message_stop.
`Reply.chunk_delay_s` paces the deltas like a model writing (a reply not streamed then
comes once its deltas would all have been written); `Reply.break_after` ends a stream early
with an `overloaded_error` event after that many characters, as the API does when it fails
mid-answer. Error replies are plain HTTP errors.

Nothing here patches the SDK: the client is pointed at `standin.base_url`.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import socket
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MESSAGES_PATH = "/v1/messages"


# What a Reply does to the connection instead of answering plainly.
RESET = "reset"  # close with TCP RST (SO_LINGER 0) before any byte of the answer
DRIP = "drip"  # headers at once, then the body one byte every `drip_s`
TRUNCATE = "truncate"  # headers with the full content-length, half the body, then close
STALL = "stall"  # read the request, answer nothing until the stand-in stops


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer: status, JSON body (or raw text), headers, delay before it,
    and optionally a transport fault (RESET, DRIP, TRUNCATE, STALL) instead of a plain answer."""

    status: int = 200
    body: dict[str, Any] | str = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    fault: str | None = None
    drip_s: float = 0.2
    chunk_chars: int = 12  # streamed: characters per text delta
    break_after: int | None = None  # streamed: an error event after this many characters
    chunk_delay_s: float = 0.0  # streamed: the wait before each text delta (a model's pace)


@dataclass(frozen=True)
class RecordedRequest:
    """A request the stand-in received (headers lower-cased, the API key left out)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float  # time.monotonic() on arrival

    @property
    def system(self) -> str:
        system = self.body.get("system", "")
        if isinstance(system, list):
            return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
        return str(system)

    @property
    def user_text(self) -> str:
        """The text of the last user message."""
        for message in reversed(self.body.get("messages", [])):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        return ""


Script = Reply | Callable[[RecordedRequest], Reply]

_PASSAGE_RE = re.compile(r'<passage id="(\d+)"[^>]*>(.*?)</passage>', re.DOTALL)


def passages_in(request: RecordedRequest) -> dict[int, str]:
    """The passages a request gave the model, by id (what a model would read)."""
    return {int(n): text for n, text in _PASSAGE_RE.findall(request.user_text)}


def tag_attributes(request: RecordedRequest, tag: str) -> list[dict[str, str]]:
    """The attributes of every <tag …> in the user message, unescaped."""
    out = []
    for m in re.finditer(r"<" + re.escape(tag) + r"((?:\s+\w+=\"[^\"]*\")*)\s*/?>", request.user_text):
        out.append({k: html.unescape(v) for k, v in re.findall(r'(\w+)="([^"]*)"', m.group(1))})
    return out


def message(
    text: str | None,
    *,
    input_tokens: int = 1200,
    output_tokens: int = 80,
    stop_reason: str = "end_turn",
    model: str = "claude-standin",
    content: list[dict] | None = None,
) -> Reply:
    """A 200 Messages API response holding one text block (or the given content blocks)."""
    blocks = content if content is not None else ([] if text is None else [{"type": "text", "text": text}])
    return Reply(
        200,
        {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
    )


def error(status: int, kind: str, text: str, headers: dict[str, str] | None = None, delay_s: float = 0.0) -> Reply:
    """An error response shaped like the API's: {"type":"error","error":{type,message}}."""
    return Reply(status, {"type": "error", "error": {"type": kind, "message": text}}, headers or {}, delay_s)


def reset() -> Reply:
    """The connection is reset (RST) after the request is read: "connection reset by peer"."""
    return Reply(fault=RESET)


def drip(reply: Reply, every_s: float = 0.2) -> Reply:
    """`reply`, its body sent one byte every `every_s` after the headers."""
    return dataclasses.replace(reply, fault=DRIP, drip_s=every_s)


def truncated(reply: Reply) -> Reply:
    """`reply` cut off halfway through its body (the connection then closes)."""
    return dataclasses.replace(reply, fault=TRUNCATE)


def stall() -> Reply:
    """No answer at all: the request is read and the connection left open and silent."""
    return Reply(fault=STALL)


def fault_catalogue(budget_s: float) -> dict[str, tuple[Callable[[], Reply], str]]:
    """The Anthropic API faults, by id: (what the stand-in answers every time, what the
    fallback label of a turn with this budget must say). Tests and benchmarks/faults.py."""
    good = message("A Release Train departs every two weeks [1].")
    return {
        "429-retry-after": (
            lambda: error(429, "rate_limit_error", "slow down", headers={"retry-after": "0.3"}),
            "HTTP 429 rate_limit_error: slow down; gave up after",
        ),
        "429-retry-after-past-budget": (
            lambda: error(429, "rate_limit_error", "slow down", headers={"retry-after": "30"}),
            f"retry-after 30 s exceeds the {budget_s:g} s budget",
        ),
        "500": (lambda: error(500, "api_error", "internal"), "HTTP 500 api_error: internal; gave up after"),
        "529-overloaded": (
            lambda: error(529, "overloaded_error", "Overloaded"),
            "HTTP 529 overloaded_error: Overloaded; gave up after",
        ),
        "connection-reset": (reset, "connection failed"),
        "read-timeout-silent": (stall, "timed out after"),
        "read-timeout-drip": (lambda: drip(good, every_s=0.2), "timed out after"),
        "body-cut-off": (lambda: truncated(good), "connection failed"),
        "body-not-json": (lambda: Reply(200, '{"id": "msg_1", "type": "mess'), "the model's reply was malformed"),
        "body-wrong-shape": (
            lambda: Reply(200, {"type": "message", "content": "not a list of blocks"}),
            "the model's reply was malformed",
        ),
        "body-text-block-without-text": (
            lambda: Reply(200, {"type": "message", "content": [{"type": "text"}]}),
            "the model's reply was malformed",
        ),
    }


def _streamable(reply: Reply) -> bool:
    return reply.status == 200 and isinstance(reply.body, dict) and reply.body.get("type") == "message"


def sse_events(reply: Reply) -> Iterator[tuple[str, dict[str, Any]]]:
    """A scripted message as the API's stream events (its text blocks as one block)."""
    body = dict(reply.body) if isinstance(reply.body, dict) else {}
    text = "".join(b.get("text", "") for b in body.get("content") or [] if b.get("type") == "text")
    usage = dict(body.get("usage") or {})
    start = {
        **body,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("input_tokens", 0), "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": start}
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    step = max(1, reply.chunk_chars)
    for at in range(0, len(text), step):
        if reply.break_after is not None and at >= reply.break_after:
            yield (
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "stand-in: overloaded mid-stream"}},
            )
            return
        yield (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text[at : at + step]}},
        )
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": body.get("stop_reason", "end_turn"), "stop_sequence": None},
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        },
    )
    yield "message_stop", {"type": "message_stop"}


class AnthropicStandIn:
    """The scripted server. Use `running()` to start it on a free port and stop it after."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Script] = deque()
        self._routes: list[tuple[Callable[[RecordedRequest], bool], Script]] = []
        self._standing: Script | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------

    def script(self, *replies: Script) -> None:
        """Queue replies, answered in order to requests no route takes."""
        with self._lock:
            self._queue.extend(replies)

    def always(self, reply: Script | None) -> None:
        """The reply for every request once the queue is empty (None: a 500 saying so)."""
        with self._lock:
            self._standing = reply

    def route(self, match: Callable[[RecordedRequest], bool], reply: Script) -> None:
        """Answer every request that `match` accepts with `reply`, before the queue."""
        with self._lock:
            self._routes.append((match, reply))

    def reset(self) -> None:
        """Forget the script, the routes and the recorded requests (one server, many cases)."""
        with self._lock:
            self._queue.clear()
            self._routes.clear()
            self._standing = None
            self.requests.clear()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the stand-in is not running"
        host, port = self._server.server_address[:2]
        assert isinstance(host, str), "the stand-in listens on a TCP address"
        return f"http://{host}:{port}"

    # -- serving ---------------------------------------------------------------------

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            chosen: Script | None = next((r for m, r in self._routes if m(request)), None)
            if chosen is None:
                chosen = self._queue.popleft() if self._queue else self._standing
        if chosen is None:
            return error(500, "api_error", "stand-in: no scripted reply left for this request")
        return chosen(request) if callable(chosen) else chosen

    def start(self) -> None:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: tests read `requests` instead

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                headers = {
                    k.lower(): v for k, v in self.headers.items() if k.lower() not in ("x-api-key", "authorization")
                }
                request = RecordedRequest(self.path, headers, body, time.monotonic())
                if self.path.split("?")[0] != MESSAGES_PATH:
                    reply = error(404, "not_found_error", f"stand-in serves only {MESSAGES_PATH}")
                else:
                    reply = standin._next(request)
                if reply.delay_s and standin._stopping.wait(reply.delay_s):
                    return  # shutting down: drop the reply
                if reply.fault == RESET:
                    self._reset()
                    return
                if reply.fault == STALL:
                    standin._stopping.wait()
                    self.close_connection = True
                    return
                if body.get("stream") and _streamable(reply) and reply.fault is None:
                    self._stream(reply)
                    return
                if reply.chunk_delay_s and _streamable(reply):  # the same pace, all at the end
                    deltas = sum(1 for e, _ in sse_events(reply) if e == "content_block_delta")
                    if standin._stopping.wait(reply.chunk_delay_s * deltas):
                        return
                payload = (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode("utf-8")
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.send_header("request-id", "req_standin_" + uuid.uuid4().hex[:12])
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    if reply.fault == TRUNCATE:
                        self.wfile.write(payload[: len(payload) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                    elif reply.fault == DRIP:
                        self.wfile.flush()
                        for i in range(len(payload)):
                            if standin._stopping.wait(reply.drip_s):
                                break
                            self.wfile.write(payload[i : i + 1])
                            self.wfile.flush()
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (its timeout)

            def _reset(self) -> None:
                """Close with RST: SO_LINGER on with a zero timeout drops the connection."""
                self.close_connection = True
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()

            def _stream(self, reply: Reply) -> None:
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.send_header("request-id", "req_standin_" + uuid.uuid4().hex[:12])
                    self.end_headers()
                    for event, data in sse_events(reply):
                        if (
                            event == "content_block_delta"
                            and reply.chunk_delay_s
                            and standin._stopping.wait(reply.chunk_delay_s)
                        ):
                            return
                        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="anthropic-standin", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


@contextmanager
def running() -> Iterator[AnthropicStandIn]:
    """A started stand-in, stopped on exit."""
    standin = AnthropicStandIn()
    standin.start()
    try:
        yield standin
    finally:
        standin.stop()
