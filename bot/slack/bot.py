"""The Slack bot: Bolt listeners that turn Slack's requests into grounded turns.

Entry points, all answered by the same grounded turn (bot.answer.turn.Answerer):
- an @mention in a channel     -> the answer in that message's thread;
- a reply in a thread where citebot answered -> a follow-up with the thread's earlier turns
  (read back from the thread when the state has forgotten it: bot.slack.recall);
- a direct message              -> the answer in the DM, one conversation per DM or DM thread;
- the slash command (/ask)      -> an ephemeral answer with "Share in channel";
  `/ask help`; `/ask why [turn]` explains the last answer from the turn log;
- buttons -> feedback, share, why; the message shortcut and Home tab: bot.slack.shortcut, .home.
- the agent DM (Slack's agent view) -> suggested prompts, thread titles, the viewed channel's
  scope for its members: bot.slack.agent; the answers' stages as task updates: bot.slack.tasks.

Speed and exactly-once: every listener acks at once (Bolt lazy listeners with
process_before_response, so the ack is written before any work starts) and the work runs
on a worker pool. Each event is claimed (its event id, and its message) in Redis or in
this process before any work, so a retried or doubled delivery gets no second reply on any
replica. A status (then Claude's streamed answer: bot.slack.stream) or a placeholder shows at once.

No silent failures: every triggered turn ends in Slack with an answer, a refusal or an
error message carrying its turn id, also when search, Redis or the model is down.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import structlog
from slack_bolt import Ack, App, BoltRequest, Respond
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient

from bot.answer.record import new_turn_id
from bot.answer.turn import Answerer
from bot.memory.state import ConversationState
from bot.memory.turnlog import TurnLog
from bot.metrics import RATE_LIMITED
from bot.slack.actions import TurnActions
from bot.slack.agent import AgentSurface
from bot.slack.client import bolt_logger
from bot.slack.dedupe import Deduper, claim_question
from bot.slack.delivery import Delivery, failure_notice
from bot.slack.home import HomeTab
from bot.slack.inbound import (
    SURFACE_COMMAND,
    SURFACE_DM,
    SURFACE_EPHEMERAL,
    SURFACE_THREAD,
    Identity,
    Question,
    cleaned,
    cut_notice,
    mention_question,
    message_question,
    parse_command,
)
from bot.slack.pool import LISTENER_WORKERS, TURN_WORKERS, WorkPool
from bot.slack.ratelimit import RateLimiter
from bot.slack.recall import ThreadRecall
from bot.slack.recall_memo import RecallMemo
from bot.slack.recent import RecentTurns, last_turn
from bot.slack.refusals import Refusals
from bot.slack.render import (
    ACTION_FEEDBACK,
    ACTION_FEEDBACK_DOWN,
    ACTION_FEEDBACK_UP,
    ACTION_SHARE,
    ACTION_WHY,
    FEEDBACK_VALUES,
    escape,
    render_help,
    render_notice,
    render_turn,
)
from bot.slack.scopes import Admission, ChannelPolicy, Scopes, not_here
from bot.slack.shortcut import SHORTCUT_CALLBACK_ID, MessageShortcut
from bot.slack.stream import AnswerStream, Streaming
from bot.slack.turns import TurnRunner
from bot.slack.viewing import InProcessViewing, Viewing
from search.errors import ConfigError

log = structlog.get_logger("citebot.slack")

# How long `citebot serve` lets answers in progress finish after SIGTERM.
DRAIN_TIMEOUT_S = 30


@dataclass(frozen=True)
class BotConfig:
    """The settings the Slack adapter reads."""

    signing_secret: str | None
    slash_command: str = "/ask"
    rate_limit_per_minute: int = 6
    socket_mode: bool = False
    listener_workers: int = LISTENER_WORKERS
    turn_workers: int = TURN_WORKERS
    source_url: str | None = None  # CITEBOT_SOURCE_URL
    stream_answers: bool = False  # the composer streams (Claude): status, then sentences


class SlackBot:
    """The Bolt app with citebot's listeners. `answerer` is called when a turn needs it
    (building it loads the model and opens the store; a failure there fails that turn
    visibly, not the server)."""

    def __init__(
        self,
        config: BotConfig,
        client: WebClient,
        identity: Identity,
        *,
        answerer: Callable[[], Answerer],
        state: ConversationState,
        turnlog: TurnLog,
        deduper: Deduper,
        limiter: RateLimiter,
        recent: RecentTurns,
        scopes: Scopes | None = None,
        recall_memo: RecallMemo | None = None,
        oauth_settings: OAuthSettings | None = None,  # many workspaces: bot.slack.many
        viewing: Viewing | None = None,
    ) -> None:
        if config.signing_secret is None and not config.socket_mode:
            raise ConfigError(
                "SLACK_SIGNING_SECRET is not set: copy the Signing Secret from the app's "
                "Basic Information page (HTTP mode verifies every request with it)"
            )
        self.config = config
        self.client = client
        self.identity = identity
        self.deduper = deduper
        self.scopes = scopes or Scopes.everything()
        self.admission = Admission(client, self.scopes)
        self.policy = self.admission.policy  # a conversation's policy (bot.slack.scopes)
        self.command = config.slash_command
        self.delivery = Delivery(client, config.source_url)
        self.refusals = Refusals()  # the agent surface's extras Slack refused (bot.slack.refusals)
        self.viewing = viewing or InProcessViewing()
        self.streaming = Streaming(client, self.delivery, identity.team_id, config.stream_answers, self.refusals)
        self.recall = ThreadRecall(client, state, identity, recall_memo)
        self.actions = TurnActions(
            self.delivery,
            turnlog,
            config.slash_command,
            self.policy,
            store=lambda: self.runner.answerer().retriever.store,
        )
        self.pool = WorkPool(config.listener_workers, "citebot-listener")
        self.turns = WorkPool(config.turn_workers, "citebot-turn")
        self.runner = TurnRunner(
            answerer=answerer,
            turnlog=turnlog,
            limiter=limiter,
            recent=recent,
            policy=self.policy,
            pool=self.turns,
            rate_limit_per_minute=config.rate_limit_per_minute,
        )
        self.app = App(
            client=client,
            signing_secret=config.signing_secret or "",
            process_before_response=True,  # ack is written first; the work runs as lazy listeners
            listener_executor=self.pool,
            name="citebot",
            logger=bolt_logger(),
            oauth_settings=oauth_settings,
        )
        self._register()

    # -- wiring ------------------------------------------------------------------------------
    def _register(self) -> None:
        app = self.app
        app.event("app_mention")(ack=_ack, lazy=[self._on_mention])
        app.event("message")(ack=_ack, lazy=[self._on_message])
        app.command(self.command)(ack=self._ack_command, lazy=[self._on_command])
        app.action(re.compile(f"^({ACTION_FEEDBACK_UP}|{ACTION_FEEDBACK_DOWN})$"))(ack=_ack, lazy=[self._on_feedback])
        app.action(ACTION_FEEDBACK)(ack=_ack, lazy=[self._on_native_feedback])
        app.action(ACTION_SHARE)(ack=_ack, lazy=[self._on_share])
        app.action(ACTION_WHY)(ack=_ack, lazy=[self._on_why])
        self.home = HomeTab(self.runner, self.client, self.scopes, self.command)
        self.shortcut = MessageShortcut(self.runner, self.delivery, self.identity, self.admission, self.command)
        self.agent = AgentSurface(
            self.client, self.runner, self.home, self.admission, self.viewing, self.refusals
        )  # the agent DM: bot.slack.agent
        app.event("app_home_opened")(ack=_ack, lazy=[self.home.on_opened, self.agent.on_home_opened])
        app.event("assistant_thread_started")(ack=_ack, lazy=[self.agent.on_thread_started])
        app.event("assistant_thread_context_changed")(ack=_ack, lazy=[self.agent.on_thread_context_changed])
        app.event("app_context_changed")(ack=_ack, lazy=[self.agent.on_context_changed])
        app.shortcut(SHORTCUT_CALLBACK_ID)(ack=_ack, lazy=[self.shortcut.on_shortcut])

    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
        """Wait until every acked piece of work has finished (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        # listener work hands turns on before it ends, so the listener pool drains first
        if not self.pool.wait_idle(timeout_s):
            return False
        return self.turns.wait_idle(max(deadline - time.monotonic(), 0.0))

    def close(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        self.drain(timeout_s)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.turns.shutdown(wait=False, cancel_futures=True)

    def warm_up(self) -> None:
        """Open the store and load the model before the first question needs them."""
        try:
            self.runner.answerer()
            log.info("warm_up_done")
        except Exception as exc:  # noqa: BLE001 - turns will report it, with their turn ids
            log.warning("warm_up_failed", error=str(exc))

    # -- events ------------------------------------------------------------------------------
    def _on_mention(self, body: dict, event: dict, request: BoltRequest) -> None:
        channel = event.get("channel", "")
        with self.runner.job(channel=channel, event_id=body.get("event_id")):
            if channel.startswith("D") or self.identity.from_a_bot(event):
                return  # DMs arrive as message.im; bots never trigger a turn
            q = mention_question(event, body.get("event_id"), _retry_num(request))
            self._answer(replace(q, shared=bool(body.get("is_ext_shared_channel"))))

    def _on_message(self, body: dict, event: dict, request: BoltRequest) -> None:
        channel = event.get("channel", "")
        with self.runner.job(channel=channel, event_id=body.get("event_id")):
            if event.get("subtype") or self.identity.from_a_bot(event) or not event.get("user"):
                return  # edits, joins, bots, ourselves
            question = message_question(event, body.get("event_id"), _retry_num(request), self.identity.bot_user_id)
            if question is None:
                return
            if question.surface == SURFACE_THREAD and not self.recall.recall(question):
                return  # not a thread citebot has answered in
            self._answer(replace(question, shared=bool(body.get("is_ext_shared_channel"))))

    # -- one question ------------------------------------------------------------------------
    def _answer(self, q: Question) -> None:
        """Claim, rate-limit, show progress, then hand the turn on: always ends visibly."""
        if not claim_question(self.deduper, q):
            return
        q = cleaned(q)  # after the claim: a retried delivery is dropped uncleaned
        turn_id = new_turn_id()
        structlog.contextvars.bind_contextvars(turn_id=turn_id, thread=q.reply_thread_ts, user=q.user)
        try:
            if not q.text:
                self.delivery.post(
                    q,
                    render_notice(
                        f"Ask me a question after the mention, e.g. _@citebot how often does the release "
                        f"train leave?_ — or type `{escape(self.command)} help`.",
                        turn_id,
                    ),
                )
                return
            policy = self.agent.scoped(q, self.policy(q.channel, q.user, own_dm=q.surface == SURFACE_DM))
            refusal = not_here(policy, q.shared)
            if refusal:
                log.info("slack_not_answered_here", reason=refusal, reply=policy.reply)
                self.delivery.post_ephemeral(q, render_notice(refusal, turn_id))
                return
            decision = self.runner.rate(q.user)
            if not decision.allowed:
                RATE_LIMITED.inc()
                log.info("slack_rate_limited", retry_after_s=decision.retry_after_s)
                self.delivery.post_ephemeral(q, self.runner.rate_notice(decision, turn_id))
                return
            if q.cut_from is not None:  # only its start was read: the asker alone is told
                self.delivery.post_ephemeral(q, render_notice(cut_notice(q.cut_from), turn_id))
            if policy.reply == "ephemeral":
                # Only the asker sees it; the thread's state is theirs alone.
                q = replace(
                    q, surface=SURFACE_EPHEMERAL, thread_key=f"{q.thread_key}:{q.user}" if q.thread_key else None
                )
                self.runner.hand_on(self._finish_ephemeral, q, turn_id, policy)
                return
            self.agent.title(q)  # a DM thread's first question names it
            stream, progress_ts = self.streaming.begin(q, turn_id)  # a status, or the placeholder
            self.runner.hand_on(self._finish, q, turn_id, progress_ts, policy, stream)
        except Exception as exc:  # noqa: BLE001 - the edge: said in Slack, logged with its trace
            self.delivery.failure(q, turn_id, exc, None)

    def _finish(
        self,
        q: Question,
        turn_id: str,
        progress_ts: str | None,
        policy: ChannelPolicy | None = None,
        stream: AnswerStream | None = None,
    ) -> None:
        """The heavy part of a turn, on the turn pool, in the log context of its event."""
        try:
            if q.in_thread and q.surface != SURFACE_THREAD:
                self.recall.recall(q)  # a mention inside an older thread: bring its turns back
            record = self.runner.run(q, turn_id, policy, stream)
            structlog.contextvars.bind_contextvars(turn_id=turn_id)  # the turn unbinds its own
            stream.finish(record) if stream else self.delivery.turn(q, record, progress_ts)
            self.runner.remember(q.user, turn_id)
        except Exception as exc:  # noqa: BLE001 - the edge: said in Slack, logged with its trace
            self.delivery.failure(q, turn_id, exc, stream.ts if stream else progress_ts)

    def _finish_ephemeral(self, q: Question, turn_id: str, policy: ChannelPolicy) -> None:
        """A turn in an "ephemeral" channel: the answer, with Share, seen by the asker only."""
        try:
            record = self.runner.run(q, turn_id, policy)
            structlog.contextvars.bind_contextvars(turn_id=turn_id)
            self.delivery.private_turn(q, record)
            self.runner.remember(q.user, turn_id)
        except Exception as exc:  # noqa: BLE001 - the edge: said to the asker, logged with its trace
            self.delivery.private_failure(q, turn_id, exc)

    # -- the slash command -------------------------------------------------------------------
    def _ack_command(self, ack: Ack, command: dict) -> None:
        parsed = parse_command(command.get("text", ""))
        if parsed.kind == "help":
            help_message = render_help(self.command, self.config.rate_limit_per_minute)
            ack(text=help_message.text, blocks=help_message.block_dicts(), response_type="ephemeral")
        elif parsed.kind == "question":
            ack(
                text=f"🔎 Looking through the collection for: _{escape(parsed.argument)}_{parsed.note}",
                response_type="ephemeral",
            )
        else:
            ack()

    def _on_command(self, command: dict, respond: Respond) -> None:
        user, channel = command.get("user_id"), command.get("channel_id", "")
        with self.runner.job(channel=channel, user=user, surface=SURFACE_COMMAND):
            parsed = parse_command(command.get("text", ""))
            if parsed.kind == "help":
                return  # the ack carried the help
            if parsed.kind == "why":
                self.actions.explain(parsed.argument or last_turn(self.runner.recent, user), respond, user, channel)
                return
            turn_id = new_turn_id()
            structlog.contextvars.bind_contextvars(turn_id=turn_id)
            q = Question(
                text=parsed.argument,
                user=user,
                channel=channel,
                surface=SURFACE_COMMAND,
                reply_thread_ts=None,
                thread_key=None,
            )
            policy = self.policy(channel, user)
            refusal = not_here(policy, not policy.shared and self.admission.shared(channel))
            if refusal:
                log.info("slack_not_answered_here", reason=refusal, reply=policy.reply)
                self.delivery.respond(respond, render_notice(refusal, turn_id), q)
                return
            decision = self.runner.rate(user)
            if not decision.allowed:
                RATE_LIMITED.inc()
                log.info("slack_rate_limited", retry_after_s=decision.retry_after_s)
                self.delivery.respond(respond, self.runner.rate_notice(decision, turn_id), q)
                return
            self.runner.hand_on(self._finish_command, q, turn_id, respond, policy)

    def _finish_command(self, q: Question, turn_id: str, respond: Respond, policy: ChannelPolicy | None = None) -> None:
        try:
            record = self.runner.run(q, turn_id, policy)
            structlog.contextvars.bind_contextvars(turn_id=turn_id)
            for message in render_turn(
                record, ephemeral=True, show_question=True, url_template=self.delivery.url_template
            ):
                self.delivery.respond(respond, message, q)
            self.runner.remember(q.user, turn_id)
        except Exception as exc:
            log.error("slack_turn_failed", error=str(exc), exc_info=exc)
            self.delivery.respond(respond, failure_notice(exc, turn_id), q)

    # -- buttons -----------------------------------------------------------------------------
    def _on_feedback(self, body: dict, action: dict, respond: Respond) -> None:
        turn_id = str(action.get("value", ""))
        user = (body.get("user") or {}).get("id")
        with self.runner.job(turn_id=turn_id, user=user, channel=(body.get("channel") or {}).get("id")):
            self.actions.feedback(turn_id, user, FEEDBACK_VALUES[action["action_id"]], respond)

    def _on_native_feedback(self, body: dict, action: dict, respond: Respond) -> None:
        user = (body.get("user") or {}).get("id")
        with self.runner.job(user=user, channel=(body.get("channel") or {}).get("id")):
            self.actions.native_feedback(str(action.get("value", "")), user, respond)

    def _on_why(self, body: dict, action: dict, respond: Respond) -> None:
        user = (body.get("user") or {}).get("id")
        with self.runner.job(user=user, channel=(body.get("channel") or {}).get("id")):
            self.actions.explain(str(action.get("value", "")), respond, user, (body.get("channel") or {}).get("id"))

    def _on_share(self, body: dict, action: dict, respond: Respond) -> None:
        turn_id = str(action.get("value", ""))
        user = (body.get("user") or {}).get("id")
        channel = (body.get("channel") or {}).get("id")
        with self.runner.job(turn_id=turn_id, user=user, channel=channel):
            self.actions.share(turn_id, user, channel, respond)


def _ack(ack: Ack) -> None:
    ack()


def _retry_num(request: BoltRequest) -> str | None:
    return request.headers.get("x-slack-retry-num", [None])[0]
