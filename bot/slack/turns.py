"""What every Slack listener shares to run a turn, and nothing more: the per-job log context,
the rate limit and its notice, the turn itself, handing it on to the turn pool, and
remembering it for the person's Home tab and `/ask why`.

SlackBot (bot.slack.bot) builds one TurnRunner and gives it to the listeners that live in
their own modules (bot.slack.home, bot.slack.shortcut), so they need nothing of the bot.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from bot.answer.record import TurnRecord
from bot.answer.turn import Answerer, failed_turn
from bot.memory.turnlog import TurnLog
from bot.slack.client import retry_budget
from bot.slack.inbound import SURFACE_DM, Question
from bot.slack.pool import WorkPool
from bot.slack.ratelimit import RateDecision, RateLimiter
from bot.slack.recent import RecentTurns, remember_turn
from bot.slack.render import SlackMessage, render_notice
from bot.slack.scopes import ChannelPolicy
from bot.slack.stream import AnswerStream
from search.errors import CitebotError

log = structlog.get_logger("citebot.slack")

# A conversation's policy: bot.slack.scopes.Admission.policy.
PolicyLookup = Callable[..., ChannelPolicy]


class TurnRunner:
    """Runs turns for the listeners. `answerer` is called when a turn needs it (building it
    loads the model and opens the store; a failure there fails that turn visibly)."""

    def __init__(
        self,
        *,
        answerer: Callable[[], Answerer],
        turnlog: TurnLog,
        limiter: RateLimiter,
        recent: RecentTurns,
        policy: PolicyLookup,
        pool: WorkPool,
        rate_limit_per_minute: int,
    ) -> None:
        self.answerer = answerer
        self.turnlog = turnlog
        self.limiter = limiter
        self.recent = recent
        self.policy = policy
        self.pool = pool
        self.rate_limit_per_minute = rate_limit_per_minute

    @contextmanager
    def job(self, **binds: Any) -> Iterator[None]:
        """Fresh log context per piece of work; nothing escapes unlogged. The work, and the
        turn it hands on (which runs in a copy of this context), share one allowance for
        waiting on Slack's rate limits and server errors (bot.slack.client.retry_budget)."""
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(**{k: v for k, v in binds.items() if v is not None})
        try:
            with retry_budget():
                yield
        except Exception:  # the edge: a worker thread must never die silently
            log.exception("slack_handler_failed")
        finally:
            structlog.contextvars.clear_contextvars()

    def rate(self, user: str | None) -> RateDecision:
        """The person's rate decision; allowed when there is no person or the limiter is down."""
        per_minute = self.rate_limit_per_minute
        if not user:
            return RateDecision(True, per_minute)
        try:
            return self.limiter.check(user)
        except CitebotError as exc:
            log.warning("rate_limit_unavailable", error=str(exc))
            return RateDecision(True, per_minute)

    @staticmethod
    def rate_notice(decision: RateDecision, turn_id: str) -> SlackMessage:
        return render_notice(
            f"⏳ That's more than {decision.limit_per_minute} questions a minute — I read each one "
            f"carefully, so please ask again in about {decision.retry_after_s} s.",
            turn_id,
        )

    def hand_on(self, work: Callable[..., None], *args: Any) -> None:
        """Run `work(*args)` on the turn pool, in a copy of this log context."""
        self.pool.submit(contextvars.copy_context().run, work, *args)

    def run(
        self, q: Question, turn_id: str, policy: ChannelPolicy | None = None, stream: AnswerStream | None = None
    ) -> TurnRecord:
        """The turn; a failed one, recorded like any other, when the pipeline cannot be built."""
        try:
            answerer = self.answerer()
        except Exception as exc:  # noqa: BLE001 - the one failure path records it
            return failed_turn(
                self.turnlog,
                q.text,
                exc,
                turn_id=turn_id,
                user=q.user,
                channel=q.channel,
                thread=q.thread_key,
                surface=q.surface,
            )
        policy = policy or self.policy(q.channel, q.user, own_dm=q.surface == SURFACE_DM)
        return answerer.ask(
            q.text,
            thread_key=q.thread_key,
            user=q.user,
            channel=q.channel,
            surface=q.surface,
            turn_id=turn_id,
            scope=policy.scope,
            release=stream.release if stream else None,
        )

    def remember(self, user: str | None, turn_id: str) -> None:
        """The person's latest turn, for the Home tab and `/ask why`."""
        remember_turn(self.recent, user, turn_id)
