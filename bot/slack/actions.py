"""What a person asks of an earlier turn: why it said that, feedback on it, share it.

Each reads or writes the turn log and always answers the person, also when the turn log
is unavailable or the turn has expired.
"""

from __future__ import annotations

from datetime import UTC, datetime

import structlog
from slack_bolt import Respond

from bot.answer.record import LoggedTurn
from bot.memory.turnlog import TurnLog
from bot.slack.delivery import Delivery
from bot.slack.inbound import SURFACE_COMMAND, Question
from bot.slack.render import escape, render_explanation, render_notice, render_turn

log = structlog.get_logger("citebot.slack")


def _now() -> str:
    return datetime.now(UTC).isoformat()


class TurnActions:
    def __init__(self, delivery: Delivery, turnlog: TurnLog, command: str) -> None:
        self.delivery = delivery
        self.turnlog = turnlog
        self.command = command

    def explain(self, turn_id: str, respond: Respond) -> None:
        """`/ask why` and the Why button: the turn's explanation from the turn log."""
        if not turn_id:
            self.delivery.respond(respond, render_notice(
                "I have no earlier answer of yours to explain — ask me something first, or give a "
                f"turn id: `{escape(self.command)} why t-…`."))
            return
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        try:
            raw = self.turnlog.get_turn(turn_id)
        except Exception as exc:  # noqa: BLE001 - say it; the log has the cause
            log.error("turn_log_unavailable", error=str(exc))
            self.delivery.respond(respond, render_notice(
                f"I can't read the turn log right now, so I can't explain turn `{escape(turn_id)}`. "
                "Please try again in a minute."))
            return
        if raw is None:
            self.delivery.respond(respond, render_notice(
                f"Turn `{escape(turn_id)}` is not in the turn log (it may have expired)."))
            return
        self.delivery.respond(respond, render_explanation(LoggedTurn.from_log(raw)))
        log.info("turn_explained")

    def feedback(self, turn_id: str, user: str | None, value: str, respond: Respond) -> None:
        """A 👍/👎 click, into the turn log beside the turn."""
        try:
            self.turnlog.add_feedback(turn_id, _now(), user, value)
        except Exception as exc:  # noqa: BLE001 - tell the person, keep the cause in the log
            log.error("feedback_not_recorded", error=str(exc))
            self.delivery.respond(respond, render_notice(
                "Sorry — I couldn't record your feedback: the turn log is unavailable.", turn_id))
            return
        log.info("feedback_recorded", value=value)
        thanks = "Thanks — noted that this answer helped." if value == "helpful" else (
            "Thanks — noted that this answer did not help; it will be reviewed.")
        self.delivery.respond(respond, render_notice(thanks, turn_id))

    def share(self, turn_id: str, user: str | None, channel: str | None, respond: Respond) -> None:
        """The Share button of an ephemeral answer: the answer, posted in the channel."""
        try:
            raw = self.turnlog.get_turn(turn_id)
        except Exception as exc:  # noqa: BLE001 - the share path reports it below
            log.error("turn_log_unavailable", error=str(exc))
            raw = None
        if raw is None:
            self.delivery.respond(respond, render_notice(
                f"I can't find turn `{escape(turn_id)}` in the turn log any more, so I can't "
                "share it. Ask again in the channel by mentioning me."))
            return
        record = LoggedTurn.from_log(raw).record
        where = Question(text=record.question, user=user, channel=channel or "",
                         surface=SURFACE_COMMAND, reply_thread_ts=None, thread_key=None)
        shared = True
        for message in render_turn(record, shared_by=user):
            shared = self.delivery.respond(respond, message, response_type="in_channel") and shared
        if not shared:
            self.delivery.respond(respond, render_notice(
                f"Sorry — Slack did not take the shared answer, so turn `{escape(turn_id)}` "
                "was not shared. Please try the button again in a minute.", turn_id), where)
            return
        self.delivery.delete_original(respond)
        log.info("turn_shared")
