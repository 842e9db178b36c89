"""/admin as WSGI middleware in front of `citebot serve`'s own application.

Routes (all GET, read-only): /admin (gaps, answers per day, coverage, ingest history),
/admin/turns?filter=…&since=… (recent turns), /admin/turns/ID (a turn's explanation),
and /admin/login (GET with ?token=, or POST from its form: sets the signed cookie and
redirects). Without CITEBOT_ADMIN_TOKEN every /admin path is 404; without a valid token
or cookie, 401 with no data. Every page is sent with a Content-Security-Policy that
allows no script, frame or form target but this server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

import structlog

from bot.admin import data, pages
from bot.admin.auth import Access, Gate
from bot.answer.record import LoggedTurn
from bot.owners.gaps import parse_period
from bot.owners.stale import stale_of
from bot.slack.mrkdwn import unescape
from bot.slack.render import render_explanation
from search.errors import CitebotError

log = structlog.get_logger("citebot.admin")

PREFIX = "/admin"
DEFAULT_SINCE = "7d"
MAX_FORM_BYTES = 4096  # the login form holds one token
HEADERS = [
    (
        "Content-Security-Policy",
        ("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
    ("Referrer-Policy", "no-referrer"),
]
WsgiApp = Callable[..., Iterable[bytes]]


def _send(
    start_response: Callable[..., Any],
    status: str,
    body: str,
    ctype: str = "text/html",
    extra: list[tuple[str, str]] | None = None,
) -> Iterable[bytes]:
    start_response(status, [("Content-Type", f"{ctype}; charset=utf-8"), *HEADERS, *(extra or [])])
    return [body.encode("utf-8")]


def _safe_next(value: str) -> str:
    """Only a path of this page after login: never another host (no open redirect)."""
    ok = value.startswith(PREFIX) and not value.startswith("//") and "\\" not in value
    return value if ok and all(31 < ord(ch) < 127 for ch in value) else PREFIX


def explanation_text(record: dict[str, Any], stale: list[dict[str, Any]]) -> str:
    """What `/ask why` shows for a turn, as plain text (Slack's escapes undone)."""
    message = render_explanation(LoggedTurn.from_log(record), stale)
    texts = [b.get("text", {}).get("text", "") for b in message.block_dicts()]
    return unescape("\n\n".join(t for t in texts if t))


class AdminPages:
    def __init__(self, gate: Gate, reader: data.Reader, inner: WsgiApp) -> None:
        self.gate = gate
        self.reader = reader
        self.inner = inner

    def __call__(self, environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "")
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            return self.inner(environ, start_response)
        method = environ.get("REQUEST_METHOD")
        if path == PREFIX + "/login":
            return self._login(environ, start_response)
        if method not in ("GET", "HEAD"):
            return _send(start_response, "405 Method Not Allowed", "read-only", "text/plain", [("Allow", "GET")])
        access = self.gate.access(environ)
        if access is None:
            log.info("admin_refused", path=path[:100])
            return _send(
                start_response,
                "401 Unauthorized",
                "unauthorized: sign in at /admin/login",
                "text/plain",
                [("WWW-Authenticate", 'Bearer realm="citebot admin"')],
            )
        query = parse_qs(str(environ.get("QUERY_STRING") or ""))
        try:
            label = (query.get("since") or [DEFAULT_SINCE])[0]
            period = parse_period(label)
        except ValueError as exc:
            return _send(start_response, "400 Bad Request", f"since: {exc}", "text/plain")
        try:
            status, title, body = self._page(path, access, period, label, query)
        except CitebotError as exc:  # the store or the turn log cannot be read: say so
            log.error("admin_page_failed", path=path[:100], error=str(exc))
            status, title, body = "503 Service Unavailable", "Unavailable", f"<p>{pages.e(exc)}</p>"
        note = (
            f"Channel {access.channel} only: its turns and the sources its scope may read."
            if access.channel
            else "Every channel."
        )
        return _send(start_response, status, pages.page(title, body, note))

    def _page(
        self, path: str, access: Access, period: Any, label: str, query: dict[str, list[str]]
    ) -> tuple[str, str, str]:
        r = self.reader
        if path in (PREFIX, PREFIX + "/"):
            records = r.turns(access, period)
            now = r.clock()
            sources = r.sources(access)
            store = r.store()
            body = pages.overview(
                r.gaps(access, period),
                data.per_day(records, now - period, now),
                data.coverage(store, sources, records, r.allows(access)),
                data.ingest_history(store, sources),
                label,
            )
            return "200 OK", "citebot for document owners", body
        if path == PREFIX + "/turns":
            which = (query.get("filter") or ["all"])[0]
            if which not in data.FILTERS:
                return (
                    "400 Bad Request",
                    "Turns",
                    f"<p>No filter {pages.e(which)}: use one of {', '.join(data.FILTERS)}.</p>",
                )
            records = r.turns(access, period)
            stale = r.stale_turns(access, records)
            rows = data.filtered(records, which, stale)
            return "200 OK", "Recent turns", pages.turns(rows, which, stale, data.outcome, label)
        if path.startswith(PREFIX + "/turns/"):
            turn_id = path.removeprefix(PREFIX + "/turns/")
            record = r.turn(access, turn_id)
            if record is None:
                return "404 Not Found", "No such turn", "<p>No turn by that id here (it may have expired).</p>"
            allows = r.allows(access)
            gone = [s for s in stale_of(r.store(), record) if allows(str(s.get("source")))]
            return "200 OK", f"Turn {turn_id}", pages.explanation(explanation_text(record, gone), turn_id)
        return "404 Not Found", "Not found", "<p>No such page.</p>"

    def _login(self, environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD")
        query = parse_qs(str(environ.get("QUERY_STRING") or ""))
        if method == "POST":
            try:
                length = min(int(environ.get("CONTENT_LENGTH") or 0), MAX_FORM_BYTES)
                form = parse_qs(environ["wsgi.input"].read(length).decode("utf-8", "replace"))
            except (ValueError, OSError):
                form = {}
            token = (form.get("token") or [""])[0]
        elif method in ("GET", "HEAD"):
            token = (query.get("token") or [""])[0]
            if not token:
                return _send(start_response, "200 OK", pages.login_form())
        else:
            return _send(start_response, "405 Method Not Allowed", "GET or POST", "text/plain")
        cookie = self.gate.cookie_for(token.strip())
        if cookie is None:
            log.info("admin_login_refused")
            return _send(start_response, "401 Unauthorized", pages.login_form("That token is not one of /admin's."))
        log.info("admin_login")
        target = _safe_next((query.get("next") or [PREFIX])[0])
        return _send(
            start_response, "303 See Other", "signed in", "text/plain", [("Set-Cookie", cookie), ("Location", target)]
        )


def admin_pages(tokens: list[tuple[str, str | None]] | None, reader: data.Reader) -> Callable[[WsgiApp], WsgiApp]:
    """Middleware putting /admin in front of an application; with no tokens, /admin is 404."""

    def wrap(inner: WsgiApp) -> WsgiApp:
        if not tokens:

            def off(environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
                path = str(environ.get("PATH_INFO") or "")
                if path == PREFIX or path.startswith(PREFIX + "/"):
                    return _send(start_response, "404 Not Found", "not found", "text/plain")
                return inner(environ, start_response)

            return off
        return AdminPages(Gate(tokens), reader, inner)

    return wrap
