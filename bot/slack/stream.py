"""Streaming an answer into its thread: a status while citebot works, then Claude's
sentences as each passes its checks, then the sources, turn id and feedback controls.

1. Status. As soon as a question is claimed, assistant.threads.setStatus shows "citebot is
   looking through the collection…" under the thread (Bolt's `set_status` makes the same
   call; it needs only chat:write in channels). It is cleared once the answer is complete.
2. Sentences. The turn hands over each sentence once its citations and quotations have
   been checked, flags included (bot.answer.release); each is one chat.appendStream
   (slack_sdk's WebClient.chat_stream with a one-character buffer, so nothing waits in a
   buffer; the first starts the message with chat.startStream). The text is escaped like
   every other text of ours, so a document can never mention or link anyone, and a link it
   writes is shown with its address, piece by piece, so pieces never join into one
   (bot.answer.textlinks).
3. The end. chat.stopStream carries the rest of the answer (whatever was not released:
   the last sentence, or the whole answer when nothing could be released early), the
   sources, checks summary, turn id, buttons and feedback controls as blocks, and the turn's
   metadata (so the thread can be read back: bot.slack.recall). Past 12,000 characters (the
   most one message's markdown may hold) the answer goes on in a further streamed message,
   cut between sentences.
4. Stages. The first sentence's call and stopStream also carry task updates (searched,
   checking, checked, with the cited sources' links): bot.slack.tasks.

Falling back, nothing lost: when setStatus is refused the turn takes the placeholder path
(bot.slack.delivery); when a streaming call fails, or what was streamed is not the start
of the turn's checked answer (the model's stream broke and another answer was served), the
answer is delivered the placeholder way instead: in place of the streamed message
(chat.update), or posted fresh when there is none. Either way the turn ends visibly once.
"""

from __future__ import annotations

import structlog
from slack_sdk import WebClient
from slack_sdk.web.chat_stream import ChatStream

from bot.answer.record import TurnRecord
from bot.answer.textlinks import visible_piece
from bot.slack.client import SLACK_ERRORS, slack_failed
from bot.slack.delivery import Delivery, turn_metadata
from bot.slack.inbound import SURFACE_EPHEMERAL, Question
from bot.slack.refusals import Refusals
from bot.slack.render import escape, turn_trailer
from bot.slack.split import MARKDOWN_MAX, split_markdown
from bot.slack.tasks import StageTasks
from bot.slack.workspace import workspace_team_id

log = structlog.get_logger("citebot.slack")

STATUS = "is looking through the collection…"
# Shown in turn while the status stands (Slack rotates them).
LOADING_MESSAGES = [
    "Searching the collection…",
    "Reading the passages…",
    "Checking every quotation against its source…",
]


class StreamBroken(Exception):
    """A streaming call failed: the rest of the turn takes the fallback path."""


class Streaming:
    """Decides which turns stream, and starts them (a status in their thread)."""

    def __init__(
        self,
        client: WebClient,
        delivery: Delivery,
        team_id: str | None,
        enabled: bool,
        refusals: Refusals | None = None,
    ) -> None:
        self.client = client
        self.delivery = delivery
        self.team_id = team_id
        self.refusals = refusals or Refusals()  # task chunks Slack refused (bot.slack.tasks)
        self.enabled = enabled  # the composer streams: Claude does; the extractive one does not

    def begin(self, q: Question, turn_id: str) -> tuple[AnswerStream | None, str | None]:
        """Progress shown at once: (a stream, None) once its status is up, or (None, the
        placeholder's ts) without a streaming composer, a thread to stream in, or the status."""
        if self.enabled and q.reply_thread_ts and q.surface != SURFACE_EPHEMERAL:
            team_id = self.team_id or workspace_team_id()  # many workspaces: the request's
            stream = AnswerStream(self.client, self.delivery, q, turn_id, team_id, self.refusals)
            if stream.status(STATUS, LOADING_MESSAGES):
                return stream, None
        return None, self.delivery.progress(q, turn_id)


class AnswerStream:
    """One answer streamed into one thread (one turn worker uses it at a time)."""

    def __init__(
        self,
        client: WebClient,
        delivery: Delivery,
        q: Question,
        turn_id: str,
        team_id: str | None,
        refusals: Refusals | None = None,
    ) -> None:
        self.client = client
        self.tasks = StageTasks(client, q, refusals or Refusals(), delivery.url_template)
        self.delivery = delivery
        self.q = q
        self.turn_id = turn_id
        self.team_id = team_id
        self.messages: list[ChatStream] = []  # the streamed messages, the current one last
        self.chars = 0  # markdown characters in the current message
        self.shown = ""  # the answer's text released so far (unescaped)
        self.tail = ""  # the last character sent (links shown: visible_links)
        self.broken: str | None = None
        self.stopped = False  # the last message was stopped

    @property
    def ts(self) -> str | None:
        """The first streamed message, once Slack has started it."""
        return self.messages[0].ts if self.messages else None

    def status(self, text: str, loading: list[str] | None = None) -> bool:
        assert self.q.reply_thread_ts is not None
        try:
            self.client.assistant_threads_setStatus(
                channel_id=self.q.channel, thread_ts=self.q.reply_thread_ts, status=text, loading_messages=loading
            )
            return True
        except SLACK_ERRORS as exc:
            log.warning("slack_status_failed", error=slack_failed(exc), status=text)
            return False

    # -- while the turn runs (bot.answer.release calls this with each checked sentence) ----
    def release(self, piece: str) -> None:
        if self.broken:
            raise StreamBroken(self.broken)
        self.tasks.checking()  # the stages ride on the first sentence's call (bot.slack.tasks)
        self._append(escape(self._unlinked(piece)))
        self.shown += piece

    def _unlinked(self, piece: str) -> str:
        """A piece with its links shown, joining no link with what was sent before it."""
        text = visible_piece(self.tail, piece)
        self.tail = text[-1:] or self.tail
        return text

    def _append(self, text: str) -> None:
        for part in _parts(text):
            if not self.messages or self.chars + len(part) > MARKDOWN_MAX:
                self._next_message()
            try:
                self.messages[-1].append(markdown_text=part, chunks=self.tasks.take())
            except SLACK_ERRORS as exc:
                self.tasks.failed(exc)
                self._broke("append", exc)
            self.chars += len(part)

    def _next_message(self) -> None:
        """The first streamed message, or the next one when this one is full."""
        if self.messages:
            try:
                self.messages[-1].stop()
            except SLACK_ERRORS as exc:
                self._broke("stop", exc)
        assert self.q.reply_thread_ts is not None
        self.messages.append(
            self.client.chat_stream(
                buffer_size=1,
                channel=self.q.channel,
                thread_ts=self.q.reply_thread_ts,
                recipient_team_id=self.team_id,
                recipient_user_id=self.q.user,
            )
        )
        self.chars = 0

    def _broke(self, call: str, exc: BaseException) -> None:
        self.broken = f"{call}: {slack_failed(exc)}"
        log.warning("slack_stream_failed", call=call, error=self.broken, streamed_chars=len(self.shown))
        raise StreamBroken(self.broken) from exc

    # -- the end of the turn ---------------------------------------------------------------
    def finish(self, record: TurnRecord) -> None:
        """The rest of the answer and its trailer; the placeholder path if streaming fails."""
        try:
            if self.broken is None and record.answer.startswith(self.shown):
                rest = escape(self._unlinked(record.answer[len(self.shown) :])) or (
                    "" if self.shown else "(empty answer)"
                )
                if not self.messages or self.chars + len(rest) > MARKDOWN_MAX:
                    self._append(rest)  # a message of its own, or more than this one holds
                    rest = ""
                trailer = turn_trailer(record, url_template=self.delivery.url_template)
                self.tasks.done(record)
                self.messages[-1].stop(
                    markdown_text=rest or None,
                    chunks=self.tasks.take(),
                    blocks=[b.to_dict() for b in trailer],
                    metadata=turn_metadata(record),
                )
                self.stopped = True
                log.info("slack_stream_done", messages=len(self.messages), streamed_chars=len(self.shown))
            else:
                if self.broken is None:
                    log.warning(
                        "slack_stream_replaced",
                        streamed_chars=len(self.shown),
                        reason="the streamed text is not the start of the checked answer",
                    )
                self._fall_back(record)
        except StreamBroken:
            self._fall_back(record)
        except SLACK_ERRORS as exc:  # stopStream itself failed
            self.tasks.failed(exc)
            self.broken = f"stop: {slack_failed(exc)}"
            log.warning("slack_stream_failed", call="stop", error=self.broken)
            self._fall_back(record)
        finally:
            self.status("")  # done: no "looking through…" left under the thread

    def _fall_back(self, record: TurnRecord) -> None:
        """Today's path: the answer in place of the first streamed message (or fresh),
        further streamed messages removed."""
        started = [m.ts for m in self.messages if m.ts]
        if self.messages and self.messages[-1].ts and not self.stopped:
            try:  # the last message may still be streaming; the others were stopped when full
                self.messages[-1].stop()
            except SLACK_ERRORS as exc:
                log.warning("slack_stream_failed", call="stop", error=slack_failed(exc))
        self.stopped = True
        self.delivery.turn(self.q, record, started[0] if started else None)
        for ts in started[1:]:
            try:
                self.client.chat_delete(channel=self.q.channel, ts=ts)
            except SLACK_ERRORS as exc:
                log.warning("slack_stream_left", error=slack_failed(exc))


def _parts(text: str) -> list[str]:
    """One release in pieces a streaming call may carry (a sentence over 12,000 characters)."""
    return [text] if len(text) <= MARKDOWN_MAX else split_markdown(text, MARKDOWN_MAX)
