"""The message shortcut: a question about someone's message, answered only to the person
who asked, in that message's thread, with a button to share the answer there.

Slack sends a message_action with the message (callback id SHORTCUT_CALLBACK_ID). It is
acked at once; the question is the message's text cleaned as Slack wording
(bot.slack.inbound.clean_question), answered under the scope of the channel the message is
in (a person's [users] table only in their own DM with citebot: bot.slack.scopes; refused
in Slack Connect and `reply = "off"` channels as everywhere), on the turn pool
like every turn, and logged. Progress and the answer go to the person alone with
chat.postEphemeral in the message's thread; where citebot cannot post (a conversation it is
not in), through the shortcut's response_url instead. Share (bot.slack.actions) posts the
answer into that thread, with the same ownership check as every Share.
"""

from __future__ import annotations

import re

import structlog
from slack_bolt import Respond

from bot.answer.record import TurnRecord, new_turn_id
from bot.metrics import RATE_LIMITED
from bot.slack.client import SLACK_ERRORS, slack_failed
from bot.slack.delivery import Delivery, failure_notice
from bot.slack.inbound import SURFACE_SHORTCUT, Identity, Question, clean_question
from bot.slack.render import SlackMessage, escape, render_notice, render_progress, render_turn
from bot.slack.scopes import Admission, ChannelPolicy, not_here
from bot.slack.turns import TurnRunner

log = structlog.get_logger("citebot.slack")

# Keep in step with slack/manifest.yml (tests/test_slack_shortcut.py checks both). Slack
# refuses a shortcut name longer than 24 characters, so the menu says "Ask citebot about
# this" and the description finishes the sentence.
SHORTCUT_CALLBACK_ID = "ask_about_message"
SHORTCUT_NAME = "Ask citebot about this"
SHORTCUT_NAME_MAX = 24
_TURN_ID = re.compile(r"\bt-[0-9a-f]{12}\b")  # bot.answer.record.new_turn_id


def shortcut_thread_key(channel: str, thread_ts: str, user: str) -> str:
    """The conversation-state key of a person's shortcut turns in one thread: theirs alone,
    as the answers are (`channel:thread:user`)."""
    return f"{channel}:{thread_ts}:{user}"


def shortcut_thread(record: TurnRecord) -> str | None:
    """The thread a shortcut turn was answered in (where Share posts it); None for other turns."""
    if record.surface != SURFACE_SHORTCUT or not record.thread:
        return None
    parts = str(record.thread).split(":")
    return parts[1] if len(parts) == 3 and parts[1] else None


def message_text(message: dict) -> str:
    """The words of a message: its text, else its attachments' (bots often post only those)."""
    text = str(message.get("text") or "").strip()
    if text:
        return text
    pieces = []
    for attachment in message.get("attachments") or []:
        if isinstance(attachment, dict):
            pieces.append(str(attachment.get("text") or attachment.get("fallback") or ""))
    return "\n".join(p for p in pieces if p.strip())


class MessageShortcut:
    """The listener of SHORTCUT_CALLBACK_ID: its turns run through the bot's TurnRunner, its
    words go out through the bot's Delivery."""

    def __init__(
        self, runner: TurnRunner, delivery: Delivery, identity: Identity, admission: Admission, command: str
    ) -> None:
        self.runner = runner
        self.delivery = delivery
        self.identity = identity
        self.admission = admission
        self.command = command

    def on_shortcut(self, body: dict, respond: Respond) -> None:
        user = (body.get("user") or {}).get("id")
        channel = (body.get("channel") or {}).get("id") or ""
        with self.runner.job(channel=channel, user=user, surface=SURFACE_SHORTCUT):
            self.ask(body, user, channel, respond)

    def ask(self, body: dict, user: str | None, channel: str, respond: Respond) -> None:
        """Check, show progress and hand the turn on; always ends with a word to the person."""
        given = body.get("message")
        message: dict = given if isinstance(given, dict) else {}
        turn_id = new_turn_id()
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        thread_ts = str(message.get("thread_ts") or message.get("ts") or body.get("message_ts") or "")
        q = Question(
            text=clean_question(message_text(message)),
            user=user,
            channel=channel,
            surface=SURFACE_SHORTCUT,
            reply_thread_ts=thread_ts or None,
            thread_key=shortcut_thread_key(channel, thread_ts, user) if thread_ts and user else None,
        )
        if not user or not channel:
            log.warning("shortcut_payload_incomplete", has_user=bool(user), has_channel=bool(channel))
            if respond is not None:
                self.delivery.respond(
                    respond,
                    render_notice(
                        "Sorry — Slack did not say which message or person this was, so I can't "
                        "answer it. Please try the shortcut again.",
                        turn_id,
                    ),
                )
            return
        try:
            if self.identity.wrote(message):
                self.say(q, respond, render_notice(self._own_answer(message), turn_id))
                return
            if not q.text:
                self.say(
                    q,
                    respond,
                    render_notice(
                        "That message has no text I can look up. Use the shortcut on a message with "
                        f"words in it, or ask me with `{escape(self.command)} your question`.",
                        turn_id,
                    ),
                )
                return
            policy = self.admission.policy(channel, user)
            refusal = not_here(policy, not policy.shared and self.admission.shared(channel))
            if refusal:
                log.info("slack_not_answered_here", reason=refusal, reply=policy.reply)
                self.say(q, respond, render_notice(refusal, turn_id))
                return
            decision = self.runner.rate(user)
            if not decision.allowed:
                RATE_LIMITED.inc()
                log.info("slack_rate_limited", retry_after_s=decision.retry_after_s)
                self.say(q, respond, self.runner.rate_notice(decision, turn_id))
                return
            self.say(q, respond, render_progress(turn_id, q.text))
            self.runner.hand_on(self.finish, q, turn_id, respond, policy)
        except Exception as exc:  # the edge: said to the person, logged with its trace
            log.error("slack_turn_failed", error=str(exc), exc_info=exc)
            self.say(q, respond, failure_notice(exc, turn_id))

    def _own_answer(self, message: dict) -> str:
        """What to say when the shortcut is used on one of citebot's own messages."""
        found = _TURN_ID.search(str(message.get("text") or ""))
        why = f"`{escape(self.command)} why{' ' + found.group(0) if found else ''}`"
        return (
            f"That is one of my own answers: {why} explains what it said and why, and a "
            "reply in its thread asks a follow-up."
        )

    def finish(self, q: Question, turn_id: str, respond: Respond, policy: ChannelPolicy) -> None:
        """The turn, on the turn pool: the answer with Share, to the asker, in the thread."""
        try:
            record = self.runner.run(q, turn_id, policy)
            structlog.contextvars.bind_contextvars(turn_id=turn_id)
            for message in render_turn(
                record, ephemeral=True, show_question=True, url_template=self.delivery.url_template
            ):
                self.say(q, respond, message)
            self.runner.remember(q.user, turn_id)
        except Exception as exc:  # the edge: said to the person, logged with its trace
            log.error("slack_turn_failed", error=str(exc), exc_info=exc)
            self.say(q, respond, failure_notice(exc, turn_id))

    def say(self, q: Question, respond: Respond, message: SlackMessage) -> bool:
        """To the asker alone, in the thread; through the response_url when Slack refuses
        that (citebot is not in the conversation). False, logged, when neither worked."""
        try:
            self.delivery.post_ephemeral(q, message)
            return True
        except SLACK_ERRORS as exc:
            log.warning("slack_ephemeral_failed", error=slack_failed(exc))
        if respond is not None and self.delivery.respond(respond, message):
            return True
        log.error("slack_reply_failed", via="response_url")
        return False
