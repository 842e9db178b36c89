"""Delivery: putting citebot's messages into Slack, so that every turn ends visibly.

A placeholder appears at once and is replaced in place by the answer; if the update is
refused, the answer is posted fresh and the placeholder removed. (Claude's answers stream
instead, bot.slack.stream, and come back to this path when streaming fails.) Slash-command replies go
through response_url, and as an ephemeral message from the bot when that fails.
"""

from __future__ import annotations

import structlog
from slack_bolt import Respond
from slack_sdk import WebClient

from bot.answer.record import TurnRecord, failure_text
from bot.slack.client import SLACK_ERRORS, slack_failed
from bot.slack.inbound import Question
from bot.slack.recall import PROGRESS_EVENT, TURN_EVENT
from bot.slack.render import SlackMessage, render_notice, render_progress, render_turn

log = structlog.get_logger("citebot.slack")


def failure_notice(exc: BaseException, turn_id: str) -> SlackMessage:
    """The one failure message, as a Slack notice."""
    return render_notice(failure_text(exc, f"`{turn_id}`"), turn_id)


def turn_metadata(record: TurnRecord) -> dict:
    """The message metadata of an answer: how its thread is read back (bot.slack.recall)."""
    return {
        "event_type": TURN_EVENT,
        "event_payload": {
            "turn_id": record.turn_id,
            "question": record.question,
            "condensed_query": record.condensed_query,
            "error": bool(record.error),
            "refused": record.refused,
            "outcome": record.outcome,
        },
    }


class Delivery:
    def __init__(self, client: WebClient, url_template: str | None = None) -> None:
        self.client = client
        self.url_template = url_template  # CITEBOT_SOURCE_URL: sources become links

    def post(self, q: Question, message: SlackMessage, metadata: dict | None = None) -> str | None:
        r = self.client.chat_postMessage(
            channel=q.channel,
            thread_ts=q.reply_thread_ts,
            text=message.text,
            blocks=message.block_dicts(),
            metadata=metadata,
            unfurl_links=False,
            unfurl_media=False,
        )
        return r.get("ts")

    def post_ephemeral(self, q: Question, message: SlackMessage) -> None:
        if not q.user:
            return
        self.client.chat_postEphemeral(
            channel=q.channel, user=q.user, thread_ts=q.reply_thread_ts, text=message.text, blocks=message.block_dicts()
        )

    def progress(self, q: Question, turn_id: str) -> str | None:
        """The placeholder; None when Slack refused it (the answer is then posted fresh)."""
        try:
            return self.post(
                q,
                render_progress(turn_id, q.text),
                {"event_type": PROGRESS_EVENT, "event_payload": {"turn_id": turn_id}},
            )
        except SLACK_ERRORS as exc:
            log.warning("slack_progress_failed", error=slack_failed(exc))
            return None

    def turn(self, q: Question, record: TurnRecord, progress_ts: str | None) -> None:
        """The answer in place of the placeholder (or fresh), then any further messages."""
        messages = render_turn(record, url_template=self.url_template)
        metadata = turn_metadata(record)
        first = messages[0]
        delivered = False
        if progress_ts:
            try:
                self.client.chat_update(
                    channel=q.channel, ts=progress_ts, text=first.text, blocks=first.block_dicts(), metadata=metadata
                )
                delivered = True
            except SLACK_ERRORS as exc:
                log.warning("slack_update_failed", error=slack_failed(exc))
        if not delivered:
            self.post(q, first, metadata)
            if progress_ts:
                try:
                    self.client.chat_delete(channel=q.channel, ts=progress_ts)
                except SLACK_ERRORS as exc:
                    log.warning("slack_placeholder_left", error=slack_failed(exc))
        for more in messages[1:]:
            self.post(q, more)

    def failure(self, q: Question, turn_id: str, exc: BaseException, progress_ts: str | None) -> None:
        """An unexpected failure: logged with its trace, and said in Slack with the turn id."""
        log.error("slack_turn_failed", error=slack_failed(exc), exc_info=exc)
        notice = failure_notice(exc, turn_id)
        try:
            if progress_ts:
                self.client.chat_update(
                    channel=q.channel, ts=progress_ts, text=notice.text, blocks=notice.block_dicts()
                )
            else:
                self.post(q, notice)
            return
        except SLACK_ERRORS as post_exc:
            log.warning("slack_reply_failed", error=slack_failed(post_exc))
        try:  # another method, another rate limit: the asker still hears of it
            self.post_ephemeral(q, notice)
        except SLACK_ERRORS as post_exc:
            log.error("slack_reply_failed", error=slack_failed(post_exc))

    def private_turn(self, q: Question, record: TurnRecord) -> None:
        """The answer, with a Share button, as ephemeral messages to the asker."""
        for message in render_turn(record, ephemeral=True, show_question=True, url_template=self.url_template):
            self.post_ephemeral(q, message)

    def private_failure(self, q: Question, turn_id: str, exc: BaseException) -> None:
        log.error("slack_turn_failed", error=slack_failed(exc), exc_info=exc)
        try:
            self.post_ephemeral(q, failure_notice(exc, turn_id))
        except SLACK_ERRORS as post_exc:
            log.error("slack_reply_failed", error=slack_failed(post_exc))

    def respond(
        self, respond: Respond, message: SlackMessage, q: Question | None = None, response_type: str = "ephemeral"
    ) -> bool:
        """Through response_url; an ephemeral message from the bot if that fails.
        True when the message reached Slack one way or the other."""
        try:
            r = respond(
                text=message.text, blocks=message.block_dicts(), response_type=response_type, replace_original=False
            )
            if r.status_code == 200:
                return True
            log.warning("slack_respond_failed", status=r.status_code, body=r.body[:200])
        except SLACK_ERRORS as exc:
            log.warning("slack_respond_failed", error=slack_failed(exc))
        if q is not None and q.user:
            try:
                self.post_ephemeral(q, message)
                return True
            except SLACK_ERRORS as exc:
                log.error("slack_reply_failed", error=slack_failed(exc))
        return False

    def delete_original(self, respond: Respond) -> None:
        """Remove the ephemeral message a button was clicked in (it has been shared)."""
        try:
            r = respond(delete_original=True)
            if r.status_code != 200:
                log.warning("slack_delete_failed", status=r.status_code, body=r.body[:200])
        except SLACK_ERRORS as exc:
            log.warning("slack_delete_failed", error=slack_failed(exc))
