"""A local stand-in for Slack, for tests and benchmarks: the Web API and response_url (signed delivery: bot/testing/slack_sender.py).

`SlackStandIn` is a stdlib threaded HTTP server on 127.0.0.1, port 0. `POST|GET /api/<method>`
answers like the Web API (auth.test, chat.postMessage, chat.update, chat.delete,
chat.postEphemeral, reactions.add/remove, conversations.replies, conversations.info,
assistant.threads.setStatus, views.publish, and the streaming trio chat.startStream,
chat.appendStream and chat.stopStream: bot/testing/slack_streams.py; the agent surface's
methods and chunk types: bot/testing/slack_agent_standin.py) and keeps each
channel's messages, so conversations.replies reads back what the bot posted or streamed,
metadata included (and `home` each person's Home tab). Slack's documented size limits are
enforced: at most 12,000 characters of markdown per streaming call and across the markdown
blocks of one message. `POST /response/<name>` is a response_url. Every call is recorded
with its arrival time (so tests can see that the status came before the first streamed
text); `fail()` makes the next calls
of a method return an error, as Slack would, and `fail_http()` answers them with HTTP 429
and Retry-After (rate limited) or a 5xx (Slack failing).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bot.testing.slack_agent_standin import AgentStandIn
from bot.testing.slack_home_standin import HomeViews
from bot.testing.slack_streams import MARKDOWN_MAX, markdown_chars, stream_call

BOT_TOKEN = "xoxb-standin-0000-secret"
SIGNING_SECRET = "standin-signing-secret-0123456789"
BOT_USER_ID = "UCITEBOT"
BOT_ID = "BCITEBOT"
TEAM_ID = "TSTANDIN"
APP_ID = "ACITEBOT"


@dataclass(frozen=True)
class Call:
    """One request the stand-in received: a Web API method or a response_url post."""

    method: str  # "chat.postMessage", …, or "response_url"
    params: dict[str, Any]
    at: float  # time.perf_counter() on arrival
    path: str
    replica: str | None = None  # which bot process called, when it uses replica_api_url()


class SlackStandIn:
    """The Slack Web API and response_url on loopback, recording every call."""

    def __init__(self, token: str = BOT_TOKEN) -> None:
        self.token = token
        self._calls: list[Call] = []
        self._messages: dict[str, list[dict]] = {}
        self._failures: dict[str, list[str]] = {}
        self._http_failures: dict[str, list[tuple[int, float | None]]] = {}
        self._lock = threading.Condition()
        self._ts = itertools.count(1)
        self._base_ts = int(time.time())
        self.shared_channels: set[str] = set()  # Slack Connect channels (conversations.info)
        # citebot's own DMs, channel -> the person (conversations.info says is_im and user);
        # any other D… channel is someone else's DM: channel_not_found, as the bot token gets.
        self.ims: dict[str, str] = {}
        self.home = HomeViews()  # views.publish: home.of(user) is their Home tab
        self.agent = AgentStandIn()  # assistant.threads.*, members, chunk types
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # the stdlib signature
                return

            def do_GET(self) -> None:
                standin._handle(self, "GET")

            def do_POST(self) -> None:
                standin._handle(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> SlackStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        return self.base_url + "/api/"

    def replica_api_url(self, name: str) -> str:
        """The Web API for one of several bot processes: its calls carry `replica=name`."""
        return f"{self.base_url}/replica/{name}/api/"

    def response_url(self, name: str | None = None) -> str:
        return f"{self.base_url}/response/{name or uuid.uuid4().hex}"

    # -- what happened ---------------------------------------------------------------------
    def calls(self, method: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout_s: float = 30.0) -> list[Call]:
        """Block until `count` calls of `method` arrived; the calls, or AssertionError."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while True:
                found = [c for c in self._calls if c.method == method]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{count} × {method} not seen in {timeout_s} s; saw {[c.method for c in self._calls]}"
                    )
                self._lock.wait(left)

    def messages(self, channel: str) -> list[dict]:
        with self._lock:
            return [dict(m) for m in self._messages.get(channel, [])]

    def statuses(self, channel: str, thread_ts: str) -> list[str]:
        """The assistant.threads.setStatus texts a thread was given, in order ("" clears)."""
        return [
            str(c.params.get("status", ""))
            for c in self.calls("assistant.threads.setStatus")
            if c.params.get("channel_id") == channel and c.params.get("thread_ts") == thread_ts
        ]

    def fail(self, method: str, error: str = "internal_error", times: int = 1) -> None:
        """The next `times` calls of `method` answer {"ok": false, "error": error}; for
        method "response_url", the next posts to a response_url answer HTTP 500."""
        with self._lock:
            self._failures.setdefault(method, []).extend([error] * times)

    def fail_http(self, method: str, status: int = 429, times: int = 1, retry_after: float | None = None) -> None:
        """The next `times` calls of `method` answer HTTP `status` as Slack does when it is
        rate limiting (429 with a Retry-After header, in seconds) or failing (5xx)."""
        with self._lock:
            self._http_failures.setdefault(method, []).extend([(status, retry_after)] * times)

    def next_ts(self) -> str:
        with self._lock:
            return self._next_ts()

    def _next_ts(self) -> str:
        return f"{self._base_ts}.{next(self._ts):06d}"

    def user_message(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None, channel_type: str = "channel"
    ) -> dict:
        """A person's message, stored in the channel; returns it as a `message` event."""
        with self._lock:
            ts = self._next_ts()
            message = {"type": "message", "user": user, "text": text, "ts": ts, "team": TEAM_ID}
            if thread_ts:
                message["thread_ts"] = thread_ts
            self._messages.setdefault(channel, []).append(message)
        return {**message, "channel": channel, "channel_type": channel_type, "event_ts": ts}

    # -- serving ---------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler, verb: str) -> None:
        arrived = time.perf_counter()
        url = urllib.parse.urlsplit(handler.path)
        replica = None
        if url.path.startswith("/replica/"):
            replica, _, rest = url.path[len("/replica/") :].partition("/")
            url = url._replace(path="/" + rest)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        params: dict[str, Any] = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        ctype = handler.headers.get("Content-Type", "")
        if raw:
            if "json" in ctype:
                params.update(json.loads(raw))
            else:
                params.update({k: v[-1] for k, v in urllib.parse.parse_qs(raw.decode()).items()})
        for key in ("blocks", "metadata", "chunks"):
            if isinstance(params.get(key), str):
                params[key] = json.loads(params[key])
        if url.path.startswith("/response/"):
            self._record(Call("response_url", params, arrived, url.path))
            with self._lock:
                failures = self._failures.get("response_url")
                error = failures.pop(0) if failures else None
            if error is not None:  # Slack answers a bad response_url post with a 4xx/5xx
                self._send(handler, 500, error.encode(), "text/plain")
            else:
                self._send(handler, 200, b"ok", "text/plain")
            return
        if not url.path.startswith("/api/"):
            self._send(handler, 404, b"not found", "text/plain")
            return
        method = url.path[len("/api/") :]
        auth = handler.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else params.get("token")
        self._record(Call(method, params, arrived, url.path, replica))
        with self._lock:
            pending = self._http_failures.get(method)
            http_failure = pending.pop(0) if pending else None
        if http_failure is not None:
            status, retry_after = http_failure
            if status == 429:
                body = json.dumps({"ok": False, "error": "ratelimited"}).encode()
                headers = {"Retry-After": str(int(retry_after if retry_after is not None else 1))}
                self._send(handler, 429, body, "application/json; charset=utf-8", headers)
            else:
                self._send(handler, status, b"<html>upstream error</html>", "text/html", {})
            return
        answer = self._answer_for(method, params, token, auth)
        self._send(handler, 200, json.dumps(answer).encode(), "application/json; charset=utf-8")

    def _record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)
            self._lock.notify_all()

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _answer_for(self, method: str, p: dict[str, Any], token: str | None, auth: str) -> dict[str, Any]:
        """The caller checked, then the answer (many workspaces: bot/testing/slack_oauth_standin.py)."""
        return self._answer(method, p) if token == self.token else {"ok": False, "error": "invalid_auth"}

    def _answer(self, method: str, p: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            pending = self._failures.get(method)
            if pending:
                return {"ok": False, "error": pending.pop(0)}
            channel = str(p.get("channel", ""))
            if self.agent.handles(method, p):
                return self.agent.answer(method, p)
            if method == "views.publish":
                return self.home.publish(p)
            if method == "auth.test":
                return {
                    "ok": True,
                    "url": "https://standin.slack.com/",
                    "team": "Stand-in",
                    "user": "citebot",
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID,
                    "bot_id": BOT_ID,
                    "is_enterprise_install": False,
                }
            if method in ("chat.postMessage", "chat.update") and markdown_chars(p) > MARKDOWN_MAX:
                return {"ok": False, "error": "msg_blocks_too_long"}
            if method.startswith("chat.") and method.endswith("Stream"):
                return stream_call(
                    self._messages.setdefault(channel, []),
                    method,
                    channel,
                    p,
                    self._next_ts,
                    {"user": BOT_USER_ID, "bot_id": BOT_ID, "team": TEAM_ID},
                )
            if method == "chat.postMessage":
                ts = self._next_ts()
                message = {
                    "type": "message",
                    "user": BOT_USER_ID,
                    "bot_id": BOT_ID,
                    "ts": ts,
                    "text": p.get("text", ""),
                    "blocks": p.get("blocks") or [],
                    "team": TEAM_ID,
                }
                if p.get("thread_ts"):
                    message["thread_ts"] = p["thread_ts"]
                if p.get("metadata"):
                    message["metadata"] = p["metadata"]
                self._messages.setdefault(channel, []).append(message)
                return {"ok": True, "channel": channel, "ts": ts, "message": message}
            if method == "chat.update":
                for message in self._messages.get(channel, []):
                    if message["ts"] == p.get("ts"):
                        message.update(text=p.get("text", ""), blocks=p.get("blocks") or [])
                        if p.get("metadata"):
                            message["metadata"] = p["metadata"]
                        return {"ok": True, "channel": channel, "ts": message["ts"], "text": message["text"]}
                return {"ok": False, "error": "message_not_found"}
            if method == "chat.delete":
                kept = [m for m in self._messages.get(channel, []) if m["ts"] != p.get("ts")]
                self._messages[channel] = kept
                return {"ok": True, "channel": channel, "ts": p.get("ts")}
            if method == "chat.postEphemeral":
                return {"ok": True, "message_ts": self._next_ts()}
            if method in ("reactions.add", "reactions.remove", "assistant.threads.setStatus"):
                return {"ok": True}
            if method == "conversations.info" and channel.startswith("D"):
                if channel not in self.ims:
                    return {"ok": False, "error": "channel_not_found"}
                return {"ok": True, "channel": {"id": channel, "is_im": True, "user": self.ims[channel]}}
            if method == "conversations.info":
                return {
                    "ok": True,
                    "channel": {
                        "id": channel,
                        "is_channel": channel.startswith("C"),
                        "is_ext_shared": channel in self.shared_channels,
                    },
                }
            if method == "conversations.replies":
                root = p.get("ts")
                thread = [
                    dict(m) for m in self._messages.get(channel, []) if m["ts"] == root or m.get("thread_ts") == root
                ]
                if not thread:
                    return {"ok": False, "error": "thread_not_found"}
                if str(p.get("include_all_metadata", "")).lower() not in ("1", "true"):
                    for m in thread:
                        m.pop("metadata", None)
                thread.sort(key=lambda m: m["ts"])
                start = int(p.get("cursor") or 0)  # as Slack: at most `limit`, oldest first
                end = start + int(p.get("limit") or 1000)
                more = end < len(thread)
                return {
                    "ok": True,
                    "messages": thread[start:end],
                    "has_more": more,
                    "response_metadata": {"next_cursor": str(end) if more else ""},
                }
            return {"ok": False, "error": "unknown_method"}
