"""The Slack test harness (a pytest plugin, loaded by conftest.py): a bot on a real HTTP
server with a WebClient pointed at the Web API stand-in (bot/testing/slack_standin.py),
Slack's requests signed with the signing secret, and helpers that read what reached
"Slack". Test modules are split by Slack surface: events, commands, actions, failures,
the server, rendering.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bot.settings import load_settings
from bot.slack.bot import SlackBot
from bot.slack.render import ACTION_WHY
from bot.slack.server import SlackHttpServer
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import (
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    SlackStandIn,
)
from bot.wiring import Components, build_bot

QUESTION = "How often does the Release Train leave?"
FOLLOW_UP = "And how long does its soak run?"
USER = "UALICE"
CHANNEL = "CGENERAL"
ACK_LIMIT_S = 3.0  # Slack's: a request not acked in 3 s is retried


# -- harness ------------------------------------------------------------------------------
@dataclass
class Harness:
    components: Components
    bot: SlackBot
    server: SlackHttpServer
    sender: SlackSender

    def drain(self) -> None:
        assert self.bot.drain(90), "the bot's work did not finish in 90 s"


@pytest.fixture()
def standin():
    s = SlackStandIn().start()
    yield s
    s.stop()


@pytest.fixture()
def start_bot(standin, test_embedder):
    """Start a bot on a real HTTP server; `store=` injects an ingested store (built with
    the test embedder: these tests exercise the adapter, not retrieval quality)."""
    started: list[Harness] = []

    def start(store=None, **overrides) -> Harness:
        settings = load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
                                 slack_api_url=standin.api_url, **overrides)
        components = Components(settings)
        components.embedder = test_embedder  # no model loaded: see bot/testing/embedder.py
        if store is not None:
            components.store = store
        bot = build_bot(components)
        server = SlackHttpServer(bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0,
                                 readiness=components.readiness).start()
        harness = Harness(components, bot, server, SlackSender(server.url))
        started.append(harness)
        return harness

    yield start
    for h in started:
        h.server.shutdown()
        h.bot.close(10)


def mention(standin: SlackStandIn, text: str, *, channel: str = CHANNEL, user: str = USER,
            thread_ts: str | None = None) -> dict:
    """A person's message mentioning citebot, stored in the channel, as an app_mention event."""
    message = standin.user_message(channel, user, f"<@{BOT_USER_ID}> {text}", thread_ts=thread_ts)
    event = {"type": "app_mention", "user": user, "text": message["text"], "ts": message["ts"],
             "channel": channel, "event_ts": message["ts"], "team": message["team"]}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def posts_in_thread(standin: SlackStandIn, channel: str, thread_ts: str | None) -> list:
    return [c for c in standin.calls("chat.postMessage")
            if c.params.get("channel") == channel and c.params.get("thread_ts") == thread_ts]


def bot_replies(standin: SlackStandIn, channel: str, thread_ts: str) -> list[dict]:
    """citebot's messages in a thread as they stand now (placeholders replaced), oldest first."""
    return [m for m in standin.messages(channel)
            if m.get("thread_ts") == thread_ts and m.get("bot_id") == BOT_ID]


def block_text(blocks: list[dict]) -> str:
    """Every text in the blocks, in order (sections, markdown, context elements, buttons)."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b.get("text"), dict):
            out.append(b["text"]["text"])
        elif b.get("type") == "markdown":
            out.append(b["text"])
        for e in b.get("elements", []):
            if isinstance(e.get("text"), dict):
                out.append(e["text"]["text"])
            elif isinstance(e.get("text"), str):
                out.append(e["text"])
    return "\n".join(out)


def buttons(blocks: list[dict]) -> dict[str, str]:
    """action_id -> value of every button."""
    return {e["action_id"]: e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]}


def feedback_buttons(blocks: list[dict]) -> dict[str, str]:
    """The native feedback buttons (context_actions / feedback_buttons): vote -> value."""
    out: dict[str, str] = {}
    for b in blocks:
        if b["type"] == "context_actions":
            for e in b["elements"]:
                if e["type"] == "feedback_buttons":
                    out["helpful"] = e["positive_button"]["value"]
                    out["not_helpful"] = e["negative_button"]["value"]
    return out


def one_answer(standin: SlackStandIn, event: dict) -> tuple[dict, str]:
    """The single reply to a mention: its placeholder updated in place; (message, turn id)."""
    thread = event.get("thread_ts") or event["ts"]
    placeholders = posts_in_thread(standin, event["channel"], thread)
    assert len(placeholders) == 1, [c.params.get("text") for c in placeholders]
    updates = [c for c in standin.calls("chat.update") if c.params["channel"] == event["channel"]]
    (message,) = bot_replies(standin, event["channel"], thread)
    assert any(u.params["ts"] == message["ts"] for u in updates), "the placeholder was not replaced"
    return message, buttons(message["blocks"])[ACTION_WHY]


