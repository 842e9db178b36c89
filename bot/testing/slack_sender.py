"""Delivers Slack's requests to a Bolt HTTP server, for tests and benchmarks.

`SlackSender` delivers events, slash commands and button clicks to a Bolt HTTP server the
way Slack does: signed with the signing secret (v0 HMAC-SHA256, as
slack_sdk.signature.SignatureVerifier checks), with X-Slack-Retry-Num on retries.
"""

from __future__ import annotations

import http.client
import itertools
import json
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.signature import SignatureVerifier

from bot.testing.slack_home_standin import home_opened_event, shortcut_payload
from bot.testing.slack_standin import APP_ID, BOT_USER_ID, SIGNING_SECRET, TEAM_ID


@dataclass(frozen=True)
class Delivery:
    """What the bot's HTTP server answered, and how long it took."""

    status: int
    body: bytes
    elapsed_s: float
    sent_at: float = field(default=0.0)  # time.perf_counter() when the request started

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class SlackSender:
    """Delivers Slack's requests to a Bolt HTTP server, signed as Slack signs them."""

    def __init__(self, url: str, signing_secret: str = SIGNING_SECRET) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path or "/slack/events"
        self.verifier = SignatureVerifier(signing_secret)
        self._ids = itertools.count(1)

    def post(
        self,
        body: str,
        content_type: str,
        *,
        timestamp: int | None = None,
        signature: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Delivery:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        sig = signature if signature is not None else self.verifier.generate_signature(timestamp=ts, body=body)
        assert sig is not None, "slack_sdk signs every body that has a timestamp"
        all_headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": sig,
            **(headers or {}),
        }
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        started = time.perf_counter()
        try:
            conn.request("POST", self.path, body=body.encode(), headers=all_headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        return Delivery(response.status, data, time.perf_counter() - started, started)

    def new_event_id(self) -> str:
        return f"Ev{uuid.uuid4().hex[:10].upper()}{next(self._ids)}"

    def envelope(self, event: dict, event_id: str | None = None, *, shared: bool = False) -> str:
        return json.dumps(
            {
                "token": "legacy-verification-token",
                "team_id": TEAM_ID,
                "api_app_id": APP_ID,
                "event": event,
                "type": "event_callback",
                "event_id": event_id or self.new_event_id(),
                "event_time": int(time.time()),
                "event_context": "standin",
                "is_ext_shared_channel": shared,
                "authorizations": [
                    {
                        "team_id": TEAM_ID,
                        "user_id": BOT_USER_ID,
                        "is_bot": True,
                        "is_enterprise_install": False,
                        "enterprise_id": None,
                    }
                ],
            }
        )

    def event(
        self,
        event: dict,
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        shared: bool = False,
        **kwargs: Any,
    ) -> Delivery:
        """`shared`: the event comes from a channel shared with another organisation."""
        headers = {}
        if retry_num:
            headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"}
        return self.post(self.envelope(event, event_id, shared=shared), "application/json", headers=headers, **kwargs)

    def command(self, text: str, *, user: str, channel: str, response_url: str, command: str = "/ask") -> Delivery:
        form = {
            "token": "legacy-verification-token",
            "team_id": TEAM_ID,
            "team_domain": "standin",
            "channel_id": channel,
            "channel_name": "general",
            "user_id": user,
            "user_name": user.lower(),
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "response_url": response_url,
            "trigger_id": f"{next(self._ids)}.{uuid.uuid4().hex[:8]}",
        }
        return self.post(urllib.parse.urlencode(form), "application/x-www-form-urlencoded")

    def home_opened(self, user: str, **kwargs: Any) -> Delivery:
        return self.event(home_opened_event(user, **kwargs))

    def shortcut(self, callback_id: str, message: dict, *, user: str, channel: str, response_url: str) -> Delivery:
        payload = shortcut_payload(
            callback_id, message, user=user, channel=channel, response_url=response_url, team_id=TEAM_ID, app_id=APP_ID
        )
        return self.post(urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded")

    def action(
        self,
        action_id: str,
        value: str,
        *,
        user: str,
        channel: str,
        response_url: str,
        message_ts: str | None = None,
        ephemeral: bool = False,
    ) -> Delivery:
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message_ts or "0",
            "channel_id": channel,
            "is_ephemeral": ephemeral,
        }
        payload = {
            "type": "block_actions",
            "team": {"id": TEAM_ID, "domain": "standin"},
            "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": "legacy-verification-token",
            "container": container,
            "trigger_id": f"{next(self._ids)}.{uuid.uuid4().hex[:8]}",
            "channel": {"id": channel},
            "response_url": response_url,
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": f"citebot_turn_{value}",
                    "value": value,
                    "type": "button",
                    "action_ts": str(time.time()),
                    "text": {"type": "plain_text", "text": action_id},
                }
            ],
        }
        return self.post(urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded")
