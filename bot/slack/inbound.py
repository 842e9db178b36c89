"""What arrives from Slack, parsed: who citebot is, questions, slash commands.

Mentions, links and Slack's escapes are taken out of the text before it becomes a
question; where the answer goes (thread, DM, ephemeral) travels with the question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.slack.render import unescape

SURFACE_MENTION = "slack_mention"
SURFACE_THREAD = "slack_thread"
SURFACE_DM = "slack_dm"
SURFACE_COMMAND = "slack_command"

_MENTION = re.compile(r"<[@#!][^>]*>")
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]+))?>")
_WHY = re.compile(r"why(?:\s+(t-[0-9a-f]{6,32}))?\s*[?.!]?", re.IGNORECASE)
_HELP_WORDS = {"", "help", "?", "-h", "--help"}


@dataclass(frozen=True)
class Identity:
    """Who citebot is in this workspace (from auth.test)."""

    bot_user_id: str | None
    bot_id: str | None
    team_id: str | None = None

    def wrote(self, message: dict) -> bool:
        """Whether citebot itself posted this message."""
        return bool((self.bot_id and message.get("bot_id") == self.bot_id)
                    or (self.bot_user_id and message.get("user") == self.bot_user_id))

    def from_a_bot(self, event: dict) -> bool:
        """Bots, citebot included, never trigger a turn."""
        return bool(event.get("bot_id") or event.get("bot_profile")
                    or event.get("subtype") == "bot_message" or self.wrote(event))


@dataclass(frozen=True)
class Question:
    """A question as it arrived from Slack, cleaned, with where its answer goes."""

    text: str
    user: str | None
    channel: str
    surface: str
    reply_thread_ts: str | None  # the thread to answer in; None = top level (a DM)
    thread_key: str | None  # the conversation-state key; None = a standalone question
    message_ts: str | None = None
    event_id: str | None = None
    retry_num: str | None = None

    @property
    def in_thread(self) -> bool:
        return self.reply_thread_ts is not None and self.reply_thread_ts != self.message_ts


@dataclass(frozen=True)
class Command:
    """A parsed slash command: help, why [turn id], or a question."""

    kind: str  # "help" | "why" | "question"
    argument: str = ""


def clean_question(text: str) -> str:
    """The question without user, channel and special mentions, links as their labels."""
    text = _MENTION.sub(" ", text or "")
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    return " ".join(unescape(text).split())


def parse_command(text: str) -> Command:
    t = clean_question(text)
    if t.lower() in _HELP_WORDS:
        return Command("help")
    m = _WHY.fullmatch(t)
    if m:
        return Command("why", m.group(1) or "")
    return Command("question", t)


def mention_question(event: dict, event_id: str | None, retry_num: str | None) -> Question:
    """An @mention in a channel: answered in the message's thread."""
    channel = event.get("channel", "")
    ts = event.get("ts")
    thread_ts = event.get("thread_ts") or ts
    return Question(
        text=clean_question(event.get("text", "")), user=event.get("user"), channel=channel,
        surface=SURFACE_MENTION, reply_thread_ts=thread_ts, thread_key=f"{channel}:{thread_ts}",
        message_ts=ts, event_id=event_id, retry_num=retry_num)


def message_question(event: dict, event_id: str | None, retry_num: str | None,
                     bot_user_id: str | None) -> Question | None:
    """A direct message, or a reply in a thread (which may be one citebot answered in);
    None for anything citebot does not answer from a message event."""
    channel = event.get("channel", "")
    ts = event.get("ts")
    thread_ts = event.get("thread_ts")
    text = event.get("text", "")
    if event.get("channel_type") == "im":
        return Question(
            text=clean_question(text), user=event.get("user"), channel=channel,
            surface=SURFACE_DM, reply_thread_ts=thread_ts,
            thread_key=f"{channel}:{thread_ts}" if thread_ts else channel,
            message_ts=ts, event_id=event_id, retry_num=retry_num)
    if not thread_ts or thread_ts == ts:
        return None  # channel chatter; citebot answers mentions there
    if bot_user_id and f"<@{bot_user_id}" in text:
        return None  # a mention: app_mention answers it
    return Question(
        text=clean_question(text), user=event.get("user"), channel=channel,
        surface=SURFACE_THREAD, reply_thread_ts=thread_ts, thread_key=f"{channel}:{thread_ts}",
        message_ts=ts, event_id=event_id, retry_num=retry_num)
