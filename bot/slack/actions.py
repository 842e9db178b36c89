"""What a person asks of an earlier turn: why it said that, feedback on it, share it.

Each reads or writes the turn log and always answers the person, also when the turn log
is unavailable or the turn has expired. Share posts an answer only where the conversation's
scope covers every source it was written from (bot.slack.scopes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import structlog
from slack_bolt import Respond

from bot.answer.record import LoggedTurn, TurnRecord
from bot.memory.turnlog import TurnLog
from bot.owners.stale import cited, stale_of
from bot.slack.client import SLACK_ERRORS, slack_failed
from bot.slack.delivery import Delivery
from bot.slack.inbound import PUBLIC_SURFACES, SURFACE_COMMAND, Question
from bot.slack.render import SlackMessage, escape, parse_feedback, render_explanation, render_notice, render_turn
from bot.slack.scopes import ChannelPolicy, uncovered
from bot.slack.shortcut import shortcut_thread
from search.store import Store

log = structlog.get_logger("citebot.slack")


def _now() -> str:
    return datetime.now(UTC).isoformat()


def may_explain(record: TurnRecord, user: str | None, channel: str | None) -> bool:
    """Whether a person may see why a turn said what it did: their own turn, or one that
    was posted for everyone in the channel they ask from."""
    if user and record.user == user:
        return True
    return bool(channel) and record.channel == channel and record.surface in PUBLIC_SURFACES


def may_share(record: TurnRecord, user: str | None, channel: str | None) -> bool:
    """Only the asker shares a private answer, and only where it was asked."""
    return bool(user) and record.user == user and bool(channel) and record.channel == channel


def _repeats(raw: dict, user: str | None, value: str) -> bool:
    """Whether this vote is the person's current one on the turn already."""
    latest = [f.get("value") for f in raw.get("feedback") or [] if f.get("user") == user]
    return bool(latest) and latest[-1] == value


def answer_sources(record: TurnRecord) -> list[str | None]:
    """Every source an answer was written from: the passages given to the composer (its
    text may draw on any of them) and what it cites."""
    return [p.get("source") for p in record.passages] + [c.get("source") for c in record.citations]


class TurnActions:
    def __init__(
        self,
        delivery: Delivery,
        turnlog: TurnLog,
        command: str,
        policy: Callable[[str, str | None], ChannelPolicy],
        store: Callable[[], Store] | None = None,
    ) -> None:
        self.store = store  # the collection, for stale citations (bot/owners/stale.py)
        self.delivery = delivery
        self.turnlog = turnlog
        self.command = command
        self.policy = policy  # a conversation's policy (SlackBot.policy)

    def explain(self, turn_id: str, respond: Respond, user: str | None = None, channel: str | None = None) -> None:
        """`/ask why` and the Why button: the turn's explanation from the turn log, for the
        person who asked it or the channel it was answered in (may_explain)."""
        if not turn_id:
            self.delivery.respond(
                respond,
                render_notice(
                    "I have no earlier answer of yours to explain — ask me something first, or give a "
                    f"turn id: `{escape(self.command)} why t-…`."
                ),
            )
            return
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        try:
            raw = self.turnlog.get_turn(turn_id)
        except Exception as exc:  # noqa: BLE001 - say it; the log has the cause
            log.error("turn_log_unavailable", error=str(exc))
            self.delivery.respond(
                respond,
                render_notice(
                    f"I can't read the turn log right now, so I can't explain turn `{escape(turn_id)}`. "
                    "Please try again in a minute."
                ),
            )
            return
        if raw is None:
            self.delivery.respond(
                respond, render_notice(f"Turn `{escape(turn_id)}` is not in the turn log (it may have expired).")
            )
            return
        turn = LoggedTurn.from_log(raw)
        if not may_explain(turn.record, user, channel):
            log.warning("turn_explain_refused", owner=turn.record.user, owner_channel=turn.record.channel)
            self.delivery.respond(
                respond,
                render_notice(
                    f"Turn `{escape(turn_id)}` was asked by someone else, somewhere you may not "
                    "see, so I won't explain it here. "
                    f"`{escape(self.command)} why` explains your own last answer."
                ),
            )
            return
        self.delivery.respond(respond, render_explanation(turn, self._stale(raw)))
        log.info("turn_explained")

    def _stale(self, raw: dict) -> list[dict]:
        """The turn's cited passages that changed since; none said when the store cannot tell."""
        if self.store is None or not cited(raw):
            return []
        try:
            return stale_of(self.store(), raw)
        except Exception as exc:  # noqa: BLE001 - the explanation stands without it; the log says why
            log.warning("stale_check_failed", error=str(exc))
            return []

    def feedback(self, turn_id: str, user: str | None, value: str, respond: Respond, *, quiet: bool = False) -> None:
        """A vote, into the turn log beside the turn. One vote per person and turn: a second
        click that changes it is recorded (the latest counts, bot.slack.render.current_votes);
        one that repeats it is not. `quiet` (Slack's native feedback buttons, which show the
        choice themselves): no message is posted, unless the vote could not be recorded."""
        try:
            raw = self.turnlog.get_turn(turn_id)
            if raw is None:  # expired, or a value that names no turn: nothing to vote on
                log.warning("feedback_turn_unknown", value=value)
                self.delivery.respond(
                    respond,
                    render_notice(
                        f"Turn `{escape(turn_id)}` is not in the turn log any more (it may have "
                        "expired), so your vote was not recorded."
                    ),
                )
                return
            if _repeats(raw, user, value):
                log.info("feedback_unchanged", value=value)
                return
            self.turnlog.add_feedback(turn_id, _now(), user, value)
        except Exception as exc:  # noqa: BLE001 - tell the person, keep the cause in the log
            log.error("feedback_not_recorded", error=str(exc))
            self.delivery.respond(
                respond, render_notice("Sorry — I couldn't record your feedback: the turn log is unavailable.", turn_id)
            )
            return
        log.info("feedback_recorded", value=value)
        if quiet:
            return
        thanks = (
            "Thanks — noted that this answer helped."
            if value == "helpful"
            else ("Thanks — noted that this answer did not help; it will be reviewed.")
        )
        self.delivery.respond(respond, render_notice(thanks, turn_id))

    def native_feedback(self, value: str, user: str | None, respond: Respond) -> None:
        """Slack's feedback_buttons: the vote recorded, nothing posted (the buttons show it)."""
        parsed = parse_feedback(value)
        if parsed is None:
            log.warning("feedback_value_unknown", value=value[:80])
            return
        vote, turn_id = parsed
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        self.feedback(turn_id, user, vote, respond, quiet=True)

    def share(self, turn_id: str, user: str | None, channel: str | None, respond: Respond) -> None:
        """The Share button of an ephemeral answer: the answer, posted in the channel (a
        shortcut's answer: in the thread of the message it was asked about)."""
        try:
            raw = self.turnlog.get_turn(turn_id)
        except Exception as exc:  # noqa: BLE001 - the share path reports it below
            log.error("turn_log_unavailable", error=str(exc))
            raw = None
        if raw is None:
            self.delivery.respond(
                respond,
                render_notice(
                    f"I can't find turn `{escape(turn_id)}` in the turn log any more, so I can't "
                    "share it. Ask again in the channel by mentioning me."
                ),
            )
            return
        record = LoggedTurn.from_log(raw).record
        if not may_share(record, user, channel):
            log.warning("turn_share_refused", owner=record.user, owner_channel=record.channel)
            self.delivery.respond(
                respond,
                render_notice(
                    f"Only the person who asked turn `{escape(turn_id)}` can share it, and only in "
                    "the channel where it was asked."
                ),
            )
            return
        outside = uncovered(self.policy(channel or "", user).scope, answer_sources(record))
        if outside:
            log.warning("turn_share_refused_scope", outside=len(outside))
            self.delivery.respond(
                respond,
                render_notice(
                    f"I can't share turn `{escape(turn_id)}` here: it was answered from documents "
                    "that this conversation may not read, and everyone in it would see them. The "
                    "answer stays private to you. Ask me here (mention me, or "
                    f"`{escape(self.command)} …`) for an answer from what this conversation may read."
                ),
            )
            return
        where = Question(
            text=record.question,
            user=user,
            channel=channel or "",
            surface=SURFACE_COMMAND,
            reply_thread_ts=None,
            thread_key=None,
        )
        messages = render_turn(record, shared_by=user, url_template=self.delivery.url_template)
        thread_ts = shortcut_thread(record)
        if thread_ts:  # asked about a message: shared into that message's thread
            shared = self._post_in_thread(replace(where, reply_thread_ts=thread_ts), messages)
        else:
            shared = True
            for message in messages:
                shared = self.delivery.respond(respond, message, response_type="in_channel") and shared
        if not shared:
            self.delivery.respond(
                respond,
                render_notice(
                    f"Sorry — Slack did not take the shared answer, so turn `{escape(turn_id)}` "
                    "was not shared. Please try the button again in a minute.",
                    turn_id,
                ),
                where,
            )
            return
        self.delivery.delete_original(respond)
        log.info("turn_shared")

    def _post_in_thread(self, where: Question, messages: list[SlackMessage]) -> bool:
        for message in messages:
            try:
                self.delivery.post(where, message)
            except SLACK_ERRORS as exc:
                log.warning("slack_share_failed", error=slack_failed(exc))
                return False
        return True
