"""Hostile requests at the real /slack/events endpoint, generated with hypothesis.

Forged requests (no signature, a wrong secret, a stale or garbled timestamp) are refused
before any parsing and do no work: the Slack stand-in records no post. Signed but
malformed bodies (any bytes, any content type, JSON of any shape) never get a 5xx. A body
over the limit is refused from its Content-Length, unread. Signed events carrying unicode
edge cases (lone surrogates, NUL, right-to-left marks, 50,000 characters) each end in
exactly one visible reply. Example counts are modest and derandomized, so the suite stays
fast and every run tries the same examples.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.slack.server import MAX_BODY_BYTES
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import BOT_USER_ID, SIGNING_SECRET
from tests.slack_harness import CHANNEL, USER, posts_in_thread

HYPOTHESIS = settings(derandomize=True, database=None, deadline=None, max_examples=40,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
# What the bot may call at Slack: none of it may happen for a forged request.
WORK_METHODS = ("chat.postMessage", "chat.update", "chat.postEphemeral", "chat.delete",
                "reactions.add", "assistant.threads.setStatus", "response_url", "conversations.replies")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def raw_post(url: str, body: bytes, headers: dict[str, str], *, send_body: bool = True) -> Answer:
    """POST exactly these bytes and headers (http.client adds only Host and Accept-Encoding)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest("POST", parts.path, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v.encode())  # bytes: a header may hold any UTF-8
        conn.endheaders()
        if send_body and body:
            conn.send(body)
        response = conn.getresponse()
        return Answer(response.status, response.read())
    finally:
        conn.close()


def sign(body: bytes, timestamp: str, secret: str = SIGNING_SECRET) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed_headers(body: bytes, content_type: str | None, secret: str = SIGNING_SECRET) -> dict[str, str]:
    ts = str(int(time.time()))
    headers = {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sign(body, ts, secret),
               "Content-Length": str(len(body))}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return headers


# -- strategies ---------------------------------------------------------------------------
CONTENT_TYPES = st.one_of(st.none(), st.sampled_from([
    "application/json", "application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x",
    "application/json; charset=latin-1", "application/xml", "", "application/x-www-form-urlencoded; charset=utf-8",
]), st.text(max_size=40).filter(lambda t: "\n" not in t and "\r" not in t and t.isascii()))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20)
ENVELOPE_TYPES = st.sampled_from(["event_callback", "url_verification", "block_actions", "view_submission",
                                  "app_rate_limited", "shortcut", "", "interactive_message"])
EVENT_TYPES = st.sampled_from(["app_mention", "message", "app_home_opened", "reaction_added", "member_joined_channel"])


@st.composite
def slack_shaped(draw) -> tuple[bytes, str]:
    """Bodies that look like Slack's: event envelopes, slash command forms, interactivity
    payloads, with any field missing, mistyped or strange."""
    kind = draw(st.sampled_from(["event", "command", "payload", "json", "bytes", "form"]))
    if kind == "event":
        event = draw(st.dictionaries(st.sampled_from(["type", "user", "text", "ts", "channel", "thread_ts",
                                                      "bot_id", "subtype", "event_ts", "channel_type"]),
                                     JSON | EVENT_TYPES, max_size=8))
        envelope = {"type": draw(ENVELOPE_TYPES), "event": event, "team_id": draw(JSON),
                    "event_id": draw(st.text(max_size=12) | JSON), "authorizations": draw(JSON)}
        return json.dumps(envelope).encode(), "application/json"
    if kind == "command":
        form = draw(st.dictionaries(st.sampled_from(["command", "text", "user_id", "channel_id", "response_url",
                                                     "trigger_id", "team_id"]), st.text(max_size=40), max_size=7))
        return urllib.parse.urlencode(form).encode(), "application/x-www-form-urlencoded"
    if kind == "payload":
        payload = draw(st.one_of(JSON, st.text(max_size=60)))
        text = payload if isinstance(payload, str) else json.dumps(payload)
        return urllib.parse.urlencode({"payload": text}).encode(), "application/x-www-form-urlencoded"
    if kind == "json":
        return json.dumps(draw(JSON)).encode(), draw(st.sampled_from(["application/json", "text/plain"]))
    if kind == "form":
        return draw(st.text(max_size=80)).encode("utf-8", "surrogatepass"), "application/x-www-form-urlencoded"
    return draw(st.binary(max_size=300)), draw(CONTENT_TYPES) or "application/json"


FORGERIES = st.sampled_from(["unsigned", "wrong_secret", "stale", "future", "garbled_ts", "bad_scheme", "empty_sig",
                             "body_changed"])


def forged_headers(body: bytes, content_type: str | None, how: str) -> dict[str, str]:
    headers = signed_headers(body, content_type)
    now = int(time.time())
    if how == "unsigned":
        del headers["X-Slack-Signature"], headers["X-Slack-Request-Timestamp"]
    elif how == "wrong_secret":
        headers = signed_headers(body, content_type, secret="not-the-" + SIGNING_SECRET)
    elif how in ("stale", "future"):
        ts = str(now - 600 if how == "stale" else now + 600)
        headers.update({"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sign(body, ts)})
    elif how == "garbled_ts":
        headers["X-Slack-Request-Timestamp"] = "١٢٣٤٥"  # Arabic-Indic digits: isdigit() but not int-safe ASCII
    elif how == "bad_scheme":
        headers["X-Slack-Signature"] = headers["X-Slack-Signature"].replace("v0=", "v1=")
    elif how == "empty_sig":
        headers["X-Slack-Signature"] = ""
    elif how == "body_changed":
        headers["X-Slack-Signature"] = sign(body + b" ", headers["X-Slack-Request-Timestamp"])
    return headers


def _alive(h) -> bool:
    with urllib.request.urlopen(h.server.url.replace("/slack/events", "/healthz"), timeout=10) as r:
        return r.status == 200


# -- tests --------------------------------------------------------------------------------
@pytest.mark.slow
def test_forged_requests_are_refused_before_parsing_and_do_no_work(standin, start_bot, small_store):
    h = start_bot(small_store)
    statuses: set[int] = set()

    @HYPOTHESIS
    @given(body=slack_shaped(), how=FORGERIES)
    def forged(body: tuple[bytes, str], how: str) -> None:
        data, content_type = body
        answer = raw_post(h.server.url, data, forged_headers(data, content_type, how))
        assert answer.status == 401, (how, data[:80], answer)
        statuses.add(answer.status)

    forged()
    # A forged real-looking mention, too: the most tempting one.
    message = standin.user_message(CHANNEL, USER, f"<@{BOT_USER_ID}> How often does the Release Train leave?")
    event = {"type": "app_mention", "user": USER, "text": message["text"], "ts": message["ts"], "channel": CHANNEL}
    envelope = SlackSender(h.server.url).envelope(event).encode()
    assert raw_post(h.server.url, envelope, forged_headers(envelope, "application/json", "wrong_secret")).status == 401
    h.drain()
    assert statuses == {401}
    assert [c.method for c in standin.calls() if c.method in WORK_METHODS] == []
    assert posts_in_thread(standin, CHANNEL, message["ts"]) == []
    assert _alive(h)


@pytest.mark.slow
def test_signed_malformed_bodies_never_get_a_5xx(standin, start_bot, small_store):
    h = start_bot(small_store)
    seen: dict[int, int] = {}

    @HYPOTHESIS
    @given(body=slack_shaped())
    def signed(body: tuple[bytes, str]) -> None:
        data, content_type = body
        answer = raw_post(h.server.url, data, signed_headers(data, content_type))
        assert answer.status < 500, (data[:120], content_type, answer)
        seen[answer.status] = seen.get(answer.status, 0) + 1

    signed()
    # The cases the issue found with 500s: "{", binary bytes, a truncated form body.
    for data, content_type in ((b"{", "application/json"), (bytes(range(256)), "application/json"),
                               (b"payload=%7B%22type%22%3A%22block_act", "application/x-www-form-urlencoded")):
        for headers in (signed_headers(data, content_type), forged_headers(data, content_type, "unsigned")):
            answer = raw_post(h.server.url, data, headers)
            assert answer.status in (400, 401, 404), (data[:40], answer)
    h.drain()
    assert _alive(h)
    assert all(status < 500 for status in seen)


@pytest.mark.slow
def test_a_body_over_the_limit_is_refused_from_its_length_unread(standin, start_bot, small_store):
    h = start_bot(small_store)
    huge = MAX_BODY_BYTES * 50
    headers = signed_headers(b"", "application/json")
    headers["Content-Length"] = str(huge)
    # Only the headers are sent: an answer proves the server did not wait for 50 MB.
    answer = raw_post(h.server.url, b"", headers, send_body=False)
    assert answer.status == 413
    # Exactly one byte over, sent whole and signed: still 413.
    body = b'{"type":"event_callback","pad":"' + b"x" * (MAX_BODY_BYTES - 32) + b'"}'
    assert len(body) > MAX_BODY_BYTES
    assert raw_post(h.server.url, body, signed_headers(body, "application/json")).status == 413
    # No Content-Length at all (chunked, or a stream that never ends): 411.
    sock = socket.create_connection((h.sender.host, h.sender.port), timeout=10)
    try:
        sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                     b"Content-Type: application/json\r\n\r\n5\r\nhello\r\n")
        assert sock.recv(64).startswith(b"HTTP/1.0 411")
    finally:
        sock.close()
    # A body just under the limit is read and judged by its signature.
    body = b'{"pad":"' + b"x" * (MAX_BODY_BYTES - 20) + b'"}'
    assert len(body) <= MAX_BODY_BYTES
    assert raw_post(h.server.url, body, forged_headers(body, "application/json", "wrong_secret")).status == 401
    assert [c.method for c in standin.calls() if c.method in WORK_METHODS] == []


UNICODE_TEXT = st.one_of(
    st.text(min_size=1, max_size=60),
    st.sampled_from([
        "\ud800 lone surrogate", "\x00NUL in the middle\x00", "\u202eright-to-left override\u202c",
        "zero\u200bwidth\u200djoiner\ufeff", "e\u0301\u0301\u0301 combining", "🚂" * 500, "\U0010ffff",
        "x" * 50_000, "\r\n\r\n", "<@U123> <!channel> <#C1|x>", "```\n" + "a" * 3000 + "\n```",
    ]))


@pytest.mark.slow
def test_signed_mentions_with_unicode_edge_cases_each_get_one_reply(standin, start_bot, small_store):
    h = start_bot(small_store, rate_limit_per_minute=10_000)
    sent: list[dict] = []

    @settings(HYPOTHESIS, max_examples=25)
    @given(text=UNICODE_TEXT)
    def mention(text: str) -> None:
        message = standin.user_message(CHANNEL, USER, f"<@{BOT_USER_ID}> {text}")
        event = {"type": "app_mention", "user": USER, "text": message["text"], "ts": message["ts"],
                 "channel": CHANNEL, "event_ts": message["ts"]}
        envelope = SlackSender(h.server.url).envelope(event).encode("utf-8", "surrogatepass")
        answer = raw_post(h.server.url, envelope, signed_headers(envelope, "application/json"))
        assert answer.status == 200, (text[:40], answer)
        sent.append(event)

    mention()
    h.drain()
    for event in sent:
        replies = posts_in_thread(standin, CHANNEL, event["ts"])
        assert len(replies) == 1, (event["text"][:60], [c.params.get("text") for c in replies])
    assert _alive(h)
