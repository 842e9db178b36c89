"""The Slack adapter (Bolt): the only module that talks to Slack.

Entry points, all answered by the same grounded turn (bot.turn.Answerer):
- an @mention in a channel     -> the answer in that message's thread;
- a reply in a thread where citebot answered -> a follow-up with the thread's earlier turns
  (read back from the thread with conversations.replies when the state has forgotten it);
- a direct message              -> the answer in the DM, one conversation per DM or DM thread;
- the slash command (/ask)      -> an ephemeral answer with "Share in channel";
  `/ask help`; `/ask why [turn]` explains the last answer from the turn log;
- buttons                       -> feedback into the turn log, share, why.

Speed and exactly-once: every listener acks at once (Bolt lazy listeners with
process_before_response, so the ack is written before any work starts) and the work runs
on a worker pool. Each event is claimed (its event id, and its message) in Redis or in
this process before any work, so a retried or doubled delivery gets no second reply on any
replica. A placeholder appears at once and is replaced in place by the answer.

No silent failures: every triggered turn ends in Slack with an answer, a refusal or an
error message carrying its turn id, also when search, Redis or the model is down.
"""

from __future__ import annotations

import contextvars
import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from slack_bolt import Ack, App, BoltRequest, Respond
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from bot.app import Components
from bot.dedupe import Deduper, InProcessDeduper, RedisDeduper
from bot.ratelimit import InProcessRateLimiter, RateDecision, RateLimiter, RedisRateLimiter
from bot.recent import InProcessRecentTurns, RecentTurns, RedisRecentTurns
from bot.render import (
    ACTION_FEEDBACK_DOWN,
    ACTION_FEEDBACK_UP,
    ACTION_SHARE,
    ACTION_WHY,
    FEEDBACK_VALUES,
    SlackMessage,
    escape,
    render_explanation,
    render_help,
    render_notice,
    render_progress,
    render_turn,
    unescape,
)
from bot.server import SlackHttpServer
from bot.state import HISTORY_TURNS, PriorTurn
from bot.turn import TurnRecord, new_turn_id
from bot.turnlog import LoggedTurn
from search.errors import CitebotError, ConfigError

log = structlog.get_logger("citebot.slack")

# Two pools. Listener threads run the light part of every request right after its ack
# (claim, rate limit, placeholder, buttons): mostly waiting on Redis and Slack, so many.
LISTENER_WORKERS = 16
# Turn threads run the heavy part (embedding, search, composing). Concurrent turns once
# failed with "Unable to create tensor" (5 of 200 in benchmarks/ack_latency.py) until the
# embedder took a lock around its tokenizer and model; encoding is now serial anyway
# (torch spreads one encode over every core), so 4 lets turns that wait on Claude or
# Elasticsearch overlap. With the pools apart, a burst still gets its placeholders at once.
TURN_WORKERS = 4
# Slack Web API calls give up after this long; a reply is then retried by the SDK once.
SLACK_TIMEOUT_S = 15
# How long `citebot serve` lets answers in progress finish after SIGTERM.
DRAIN_TIMEOUT_S = 30
# conversations.replies pages read when recalling a thread (200 messages a page).
RECALL_PAGES = 5

# Message metadata (event_type) on citebot's own messages; a thread is read back from it.
PROGRESS_EVENT = "citebot_progress"
TURN_EVENT = "citebot_turn"

SURFACE_MENTION = "slack_mention"
SURFACE_THREAD = "slack_thread"
SURFACE_DM = "slack_dm"
SURFACE_COMMAND = "slack_command"

_SLACK_ERRORS = (SlackClientError, OSError)  # API errors, and the network under the SDK
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


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _slack_error(exc: BaseException) -> str:
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or exc.response.status_code)
    return f"{type(exc).__name__}: {exc}"


class WorkPool(ThreadPoolExecutor):
    """Bolt's listener executor, counting work in flight so a server can drain it."""

    def __init__(self, workers: int, name: str) -> None:
        super().__init__(max_workers=workers, thread_name_prefix=name)
        self._pending = 0
        self._idle = threading.Condition()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        with self._idle:
            self._pending += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._finished(None)
            raise
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _future: Future | None) -> None:
        with self._idle:
            self._pending -= 1
            if self._pending == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """True once no work is queued or running; False if `timeout_s` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout_s)


class _ClientGivenOnPurpose(logging.Filter):
    """Drops Bolt's start-up warning that SLACK_BOT_TOKEN in the environment goes unused:
    citebot always hands Bolt its own client (for CITEBOT_SLACK_API_URL), built from it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _bolt_logger() -> logging.Logger:
    logger = logging.getLogger("citebot.bolt")
    if not any(isinstance(f, _ClientGivenOnPurpose) for f in logger.filters):
        logger.addFilter(_ClientGivenOnPurpose())
    return logger


def make_client(components: Components) -> WebClient:
    """The Web API client: SLACK_BOT_TOKEN, and CITEBOT_SLACK_API_URL for a stand-in."""
    settings = components.settings
    if settings.slack_bot_token is None:
        raise ConfigError(
            "SLACK_BOT_TOKEN is not set: install the app to your workspace and copy the "
            "Bot User OAuth Token (xoxb-…) from its OAuth & Permissions page")
    kwargs: dict[str, Any] = {"token": settings.slack_bot_token.get_secret_value(),
                              "timeout": SLACK_TIMEOUT_S}
    if settings.slack_api_url:
        kwargs["base_url"] = settings.slack_api_url.rstrip("/") + "/"
    client = WebClient(**kwargs)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
    return client


def fetch_identity(client: WebClient) -> Identity:
    """auth.test: proves the token works and tells citebot its own user and bot ids."""
    try:
        r = client.auth_test()
    except SlackApiError as exc:
        raise ConfigError(
            f"Slack refused SLACK_BOT_TOKEN (auth.test: {_slack_error(exc)}); copy the Bot User "
            "OAuth Token (xoxb-…) from the app's OAuth & Permissions page") from exc
    except _SLACK_ERRORS as exc:
        raise ConfigError(
            f"cannot reach the Slack Web API at {client.base_url} ({_slack_error(exc)}); "
            "check CITEBOT_SLACK_API_URL and the network") from exc
    return Identity(bot_user_id=r.get("user_id"), bot_id=r.get("bot_id"), team_id=r.get("team_id"))


class SlackBot:
    """The Bolt app with citebot's listeners; build it with `build_bot`."""

    def __init__(
        self,
        components: Components,
        client: WebClient,
        identity: Identity,
        *,
        deduper: Deduper,
        limiter: RateLimiter,
        recent: RecentTurns,
        listener_workers: int = LISTENER_WORKERS,
        turn_workers: int = TURN_WORKERS,
        socket_mode: bool = False,
    ) -> None:
        settings = components.settings
        secret = settings.slack_signing_secret
        if secret is None and not socket_mode:
            raise ConfigError(
                "SLACK_SIGNING_SECRET is not set: copy the Signing Secret from the app's "
                "Basic Information page (HTTP mode verifies every request with it)")
        self.components = components
        self.client = client
        self.identity = identity
        self.deduper = deduper
        self.limiter = limiter
        self.recent = recent
        self.command = settings.slash_command
        self.pool = WorkPool(listener_workers, "citebot-listener")
        self.turns = WorkPool(turn_workers, "citebot-turn")
        self.app = App(
            client=client,
            signing_secret=secret.get_secret_value() if secret else "",
            process_before_response=True,  # ack is written first; the work runs as lazy listeners
            listener_executor=self.pool,
            name="citebot",
            logger=_bolt_logger(),
        )
        self._register()

    # -- wiring ------------------------------------------------------------------------------
    def _register(self) -> None:
        app = self.app
        app.event("app_mention")(ack=_ack, lazy=[self._on_mention])
        app.event("message")(ack=_ack, lazy=[self._on_message])
        app.command(self.command)(ack=self._ack_command, lazy=[self._on_command])
        app.action(re.compile(f"^({ACTION_FEEDBACK_UP}|{ACTION_FEEDBACK_DOWN})$"))(
            ack=_ack, lazy=[self._on_feedback])
        app.action(ACTION_SHARE)(ack=_ack, lazy=[self._on_share])
        app.action(ACTION_WHY)(ack=_ack, lazy=[self._on_why])

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
            self.components.answerer  # noqa: B018 - building it is the point
            log.info("warm_up_done")
        except Exception as exc:  # noqa: BLE001 - turns will report it, with their turn ids
            log.warning("warm_up_failed", error=str(exc))

    @contextmanager
    def _job(self, **binds: Any) -> Iterator[None]:
        """Fresh log context per piece of work; nothing escapes unlogged."""
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(**{k: v for k, v in binds.items() if v is not None})
        try:
            yield
        except Exception:  # the edge: a worker thread must never die silently
            log.exception("slack_handler_failed")
        finally:
            structlog.contextvars.clear_contextvars()

    # -- events ------------------------------------------------------------------------------
    def _is_ours(self, message: dict) -> bool:
        ident = self.identity
        return bool((ident.bot_id and message.get("bot_id") == ident.bot_id)
                    or (ident.bot_user_id and message.get("user") == ident.bot_user_id))

    def _from_a_bot(self, event: dict) -> bool:
        return bool(event.get("bot_id") or event.get("bot_profile")
                    or event.get("subtype") == "bot_message" or self._is_ours(event))

    def _on_mention(self, body: dict, event: dict, request: BoltRequest) -> None:
        channel = event.get("channel", "")
        with self._job(channel=channel, event_id=body.get("event_id")):
            if channel.startswith("D") or self._from_a_bot(event):
                return  # DMs arrive as message.im; bots never trigger a turn
            ts = event.get("ts")
            thread_ts = event.get("thread_ts") or ts
            question = Question(
                text=clean_question(event.get("text", "")), user=event.get("user"), channel=channel,
                surface=SURFACE_MENTION, reply_thread_ts=thread_ts, thread_key=f"{channel}:{thread_ts}",
                message_ts=ts, event_id=body.get("event_id"),
                retry_num=request.headers.get("x-slack-retry-num", [None])[0])
            self._answer(question)

    def _on_message(self, body: dict, event: dict, request: BoltRequest) -> None:
        channel = event.get("channel", "")
        with self._job(channel=channel, event_id=body.get("event_id")):
            if event.get("subtype") or self._from_a_bot(event) or not event.get("user"):
                return  # edits, joins, bots, ourselves
            ts = event.get("ts")
            thread_ts = event.get("thread_ts")
            retry = request.headers.get("x-slack-retry-num", [None])[0]
            text = event.get("text", "")
            if event.get("channel_type") == "im":
                question = Question(
                    text=clean_question(text), user=event.get("user"), channel=channel,
                    surface=SURFACE_DM, reply_thread_ts=thread_ts,
                    thread_key=f"{channel}:{thread_ts}" if thread_ts else channel,
                    message_ts=ts, event_id=body.get("event_id"), retry_num=retry)
                self._answer(question)
                return
            if not thread_ts or thread_ts == ts:
                return  # channel chatter; citebot answers mentions there
            if self.identity.bot_user_id and f"<@{self.identity.bot_user_id}" in text:
                return  # a mention: app_mention answers it
            question = Question(
                text=clean_question(text), user=event.get("user"), channel=channel,
                surface=SURFACE_THREAD, reply_thread_ts=thread_ts, thread_key=f"{channel}:{thread_ts}",
                message_ts=ts, event_id=body.get("event_id"), retry_num=retry)
            if not self._recall_thread(question):
                return  # not a thread citebot has answered in
            self._answer(question)

    def _claim(self, q: Question) -> bool:
        """First delivery wins: the event id (retries), then the message (one post, two events)."""
        keys = []
        if q.event_id:
            keys.append(f"event:{q.event_id}")
        if q.message_ts:
            keys.append(f"message:{q.channel}:{q.message_ts}")
        for key in keys:
            try:
                if not self.deduper.claim(key):
                    log.info("slack_duplicate_dropped", key=key, retry_num=q.retry_num)
                    return False
            except CitebotError as exc:  # answering twice beats never answering
                log.warning("dedupe_unavailable", error=str(exc))
        return True

    def _rate(self, user: str | None) -> RateDecision:
        per_minute = self.components.settings.rate_limit_per_minute
        if not user:
            return RateDecision(True, per_minute)
        try:
            return self.limiter.check(user)
        except CitebotError as exc:
            log.warning("rate_limit_unavailable", error=str(exc))
            return RateDecision(True, per_minute)

    @staticmethod
    def _rate_notice(decision: RateDecision, turn_id: str) -> SlackMessage:
        return render_notice(
            f"⏳ That's more than {decision.limit_per_minute} questions a minute — I read each one "
            f"carefully, so please ask again in about {decision.retry_after_s} s.", turn_id)

    def _recall_thread(self, q: Question) -> bool:
        """Whether citebot has answered in q's thread; refills the state from the thread if needed."""
        assert q.thread_key is not None and q.reply_thread_ts is not None
        state = self.components.state
        try:
            if state.history(q.thread_key):
                return True
        except Exception as exc:  # noqa: BLE001 - Redis down: read the thread instead
            log.warning("thread_state_unavailable", error=str(exc))
        messages: list[dict] = []
        cursor = None
        try:
            for _ in range(RECALL_PAGES):
                r = self.client.conversations_replies(
                    channel=q.channel, ts=q.reply_thread_ts, include_all_metadata=True, limit=200,
                    cursor=cursor)
                messages += r.get("messages") or []
                cursor = (r.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    break
        except _SLACK_ERRORS as exc:
            log.warning("slack_thread_read_failed", error=_slack_error(exc))
            return False
        ours = [m for m in messages if self._is_ours(m)]
        if not ours:
            return False
        turns = []
        for m in ours:
            meta = m.get("metadata") or {}
            payload = meta.get("event_payload") or {}
            if meta.get("event_type") != TURN_EVENT or payload.get("error"):
                continue  # placeholders and error replies are no earlier turns
            if not payload.get("question"):
                continue
            turns.append(PriorTurn(
                turn_id=str(payload.get("turn_id", "")), question=str(payload["question"]),
                condensed=str(payload.get("condensed_query") or payload["question"]),
                answer=unescape(m.get("text", ""))))
        try:
            if turns and not state.history(q.thread_key):
                for turn in turns[-HISTORY_TURNS:]:
                    state.append(q.thread_key, turn)
        except Exception as exc:  # noqa: BLE001 - the turn itself will meet and report this
            log.warning("thread_state_unavailable", error=str(exc))
        log.info("slack_thread_recalled", turns=len(turns), messages=len(messages))
        return True

    # -- one question ------------------------------------------------------------------------
    def _answer(self, q: Question) -> None:
        """Claim, rate-limit, show progress, then hand the turn on: always ends visibly."""
        if not self._claim(q):
            return
        turn_id = new_turn_id()
        structlog.contextvars.bind_contextvars(turn_id=turn_id, thread=q.reply_thread_ts, user=q.user)
        try:
            if not q.text:
                self._post(q, render_notice(
                    f"Ask me a question after the mention, e.g. _@citebot how often does the release "
                    f"train leave?_ — or type `{escape(self.command)} help`.", turn_id))
                return
            decision = self._rate(q.user)
            if not decision.allowed:
                log.info("slack_rate_limited", retry_after_s=decision.retry_after_s)
                self._post_ephemeral(q, self._rate_notice(decision, turn_id))
                return
            progress_ts = self._post_progress(q, turn_id)
            self.turns.submit(contextvars.copy_context().run, self._finish, q, turn_id, progress_ts)
        except Exception as exc:  # noqa: BLE001 - the edge: said in Slack, logged with its trace
            self._fail_visibly(q, turn_id, exc, None)

    def _finish(self, q: Question, turn_id: str, progress_ts: str | None) -> None:
        """The heavy part of a turn, on the turn pool, in the log context of its event."""
        try:
            if q.in_thread and q.surface != SURFACE_THREAD:
                self._recall_thread(q)  # a mention inside an older thread: bring its turns back
            record = self._run_turn(q, turn_id)
            structlog.contextvars.bind_contextvars(turn_id=turn_id)  # the turn unbinds its own
            self._deliver(q, record, progress_ts)
            self._remember(q.user, turn_id)
        except Exception as exc:  # noqa: BLE001 - the edge: said in Slack, logged with its trace
            self._fail_visibly(q, turn_id, exc, progress_ts)

    def _fail_visibly(self, q: Question, turn_id: str, exc: Exception, progress_ts: str | None) -> None:
        """An unexpected failure: logged with its trace, and said in Slack with the turn id."""
        log.exception("slack_turn_failed", error=_slack_error(exc))
        notice = render_notice(
            f"Sorry — something went wrong while answering this (turn `{turn_id}`).", turn_id)
        try:
            if progress_ts:
                self.client.chat_update(channel=q.channel, ts=progress_ts, text=notice.text,
                                        blocks=notice.block_dicts())
            else:
                self._post(q, notice)
        except _SLACK_ERRORS as post_exc:
            log.error("slack_reply_failed", error=_slack_error(post_exc))

    def _run_turn(self, q: Question, turn_id: str) -> TurnRecord:
        try:
            answerer = self.components.answerer
        except Exception as exc:  # noqa: BLE001 - store empty, search or model unavailable
            return self._failed_turn(q, turn_id, exc)
        try:
            return answerer.ask(q.text, thread_key=q.thread_key, user=q.user, channel=q.channel,
                                surface=q.surface, turn_id=turn_id)
        except Exception as exc:  # noqa: BLE001 - ask() reports its own errors; this is a bug guard
            return self._failed_turn(q, turn_id, exc)

    def _failed_turn(self, q: Question, turn_id: str, exc: Exception) -> TurnRecord:
        """A turn that could not start: recorded and logged like any other, and shown."""
        record = TurnRecord(turn_id=turn_id, created_at=_now(), question=q.text, condensed_query=q.text,
                            user=q.user, channel=q.channel, thread=q.thread_key, surface=q.surface)
        if isinstance(exc, CitebotError):
            record.error = str(exc)
            record.answer = f"Sorry — I could not answer this: {exc} (turn {turn_id})"
        else:
            record.error = f"{type(exc).__name__}: {exc}"
            record.answer = f"Sorry — something went wrong while answering (turn {turn_id})."
        try:
            self.components.turnlog.put_turn(turn_id, record.created_at, record.as_dict())
        except Exception as log_exc:  # noqa: BLE001 - a lost record must not lose the reply
            record.errors.append(f"turn log write failed: {log_exc}")
        log.error("turn", surface=q.surface, user=q.user, channel=q.channel, error=record.error,
                  errors=record.errors, refused=False)
        return record

    def _remember(self, user: str | None, turn_id: str) -> None:
        if not user:
            return
        try:
            self.recent.remember(user, turn_id)
        except CitebotError as exc:
            log.warning("last_turn_not_remembered", error=str(exc))

    # -- talking to Slack --------------------------------------------------------------------
    def _post(self, q: Question, message: SlackMessage, metadata: dict | None = None) -> str | None:
        r = self.client.chat_postMessage(
            channel=q.channel, thread_ts=q.reply_thread_ts, text=message.text,
            blocks=message.block_dicts(), metadata=metadata, unfurl_links=False, unfurl_media=False)
        return r.get("ts")

    def _post_ephemeral(self, q: Question, message: SlackMessage) -> None:
        if not q.user:
            return
        self.client.chat_postEphemeral(channel=q.channel, user=q.user, thread_ts=q.reply_thread_ts,
                                       text=message.text, blocks=message.block_dicts())

    def _post_progress(self, q: Question, turn_id: str) -> str | None:
        try:
            return self._post(q, render_progress(turn_id, q.text),
                              {"event_type": PROGRESS_EVENT, "event_payload": {"turn_id": turn_id}})
        except _SLACK_ERRORS as exc:  # no placeholder: the answer is posted fresh instead
            log.warning("slack_progress_failed", error=_slack_error(exc))
            return None

    def _deliver(self, q: Question, record: TurnRecord, progress_ts: str | None) -> None:
        messages = render_turn(record)
        metadata = {"event_type": TURN_EVENT, "event_payload": {
            "turn_id": record.turn_id, "question": record.question,
            "condensed_query": record.condensed_query, "error": bool(record.error),
            "refused": record.refused}}
        first = messages[0]
        delivered = False
        if progress_ts:
            try:
                self.client.chat_update(channel=q.channel, ts=progress_ts, text=first.text,
                                        blocks=first.block_dicts(), metadata=metadata)
                delivered = True
            except _SLACK_ERRORS as exc:
                log.warning("slack_update_failed", error=_slack_error(exc))
        if not delivered:
            self._post(q, first, metadata)
            if progress_ts:
                try:
                    self.client.chat_delete(channel=q.channel, ts=progress_ts)
                except _SLACK_ERRORS as exc:
                    log.warning("slack_placeholder_left", error=_slack_error(exc))
        for more in messages[1:]:
            self._post(q, more)

    # -- the slash command -------------------------------------------------------------------
    def _ack_command(self, ack: Ack, command: dict) -> None:
        parsed = parse_command(command.get("text", ""))
        if parsed.kind == "help":
            help_message = render_help(self.command, self.components.settings.rate_limit_per_minute)
            ack(text=help_message.text, blocks=help_message.block_dicts(), response_type="ephemeral")
        elif parsed.kind == "question":
            ack(text=f"🔎 Looking through the collection for: _{escape(parsed.argument)}_",
                response_type="ephemeral")
        else:
            ack()

    def _on_command(self, command: dict, respond: Respond) -> None:
        user, channel = command.get("user_id"), command.get("channel_id", "")
        with self._job(channel=channel, user=user, surface=SURFACE_COMMAND):
            parsed = parse_command(command.get("text", ""))
            if parsed.kind == "help":
                return  # the ack carried the help
            if parsed.kind == "why":
                self._explain(parsed.argument or self._last_turn(user), respond)
                return
            turn_id = new_turn_id()
            structlog.contextvars.bind_contextvars(turn_id=turn_id)
            q = Question(text=parsed.argument, user=user, channel=channel, surface=SURFACE_COMMAND,
                         reply_thread_ts=None, thread_key=None)
            decision = self._rate(user)
            if not decision.allowed:
                log.info("slack_rate_limited", retry_after_s=decision.retry_after_s)
                self._respond(respond, self._rate_notice(decision, turn_id), q)
                return
            self.turns.submit(contextvars.copy_context().run, self._finish_command, q, turn_id, respond)

    def _finish_command(self, q: Question, turn_id: str, respond: Respond) -> None:
        try:
            record = self._run_turn(q, turn_id)
            structlog.contextvars.bind_contextvars(turn_id=turn_id)
            for message in render_turn(record, ephemeral=True, show_question=True):
                self._respond(respond, message, q)
            self._remember(q.user, turn_id)
        except Exception:  # the edge: a worker thread must never die silently
            log.exception("slack_turn_failed")
            self._respond(respond, render_notice(
                f"Sorry — something went wrong while answering this (turn `{turn_id}`).", turn_id), q)

    def _respond(self, respond: Respond, message: SlackMessage, q: Question | None = None,
                 response_type: str = "ephemeral") -> None:
        """Through response_url; an ephemeral message from the bot if that fails."""
        try:
            r = respond(text=message.text, blocks=message.block_dicts(), response_type=response_type,
                        replace_original=False)
            if r.status_code == 200:
                return
            log.warning("slack_respond_failed", status=r.status_code, body=r.body[:200])
        except _SLACK_ERRORS as exc:
            log.warning("slack_respond_failed", error=_slack_error(exc))
        if q is not None and q.user:
            self._post_ephemeral(q, message)

    def _last_turn(self, user: str | None) -> str:
        if not user:
            return ""
        try:
            return self.recent.last(user) or ""
        except CitebotError as exc:
            log.warning("last_turn_unavailable", error=str(exc))
            return ""

    def _explain(self, turn_id: str, respond: Respond) -> None:
        if not turn_id:
            self._respond(respond, render_notice(
                "I have no earlier answer of yours to explain — ask me something first, or give a "
                f"turn id: `{escape(self.command)} why t-…`."))
            return
        structlog.contextvars.bind_contextvars(turn_id=turn_id)
        try:
            raw = self.components.turnlog.get_turn(turn_id)
        except Exception as exc:  # noqa: BLE001 - say it; the log has the cause
            log.error("turn_log_unavailable", error=str(exc))
            self._respond(respond, render_notice(
                f"I can't read the turn log right now, so I can't explain turn `{escape(turn_id)}`. "
                "Please try again in a minute."))
            return
        if raw is None:
            self._respond(respond, render_notice(
                f"Turn `{escape(turn_id)}` is not in the turn log (it may have expired)."))
            return
        self._respond(respond, render_explanation(LoggedTurn.from_log(raw)))
        log.info("turn_explained")

    # -- buttons -----------------------------------------------------------------------------
    def _on_feedback(self, body: dict, action: dict, respond: Respond) -> None:
        turn_id = str(action.get("value", ""))
        user = (body.get("user") or {}).get("id")
        with self._job(turn_id=turn_id, user=user, channel=(body.get("channel") or {}).get("id")):
            value = FEEDBACK_VALUES[action["action_id"]]
            try:
                self.components.turnlog.add_feedback(turn_id, _now(), user, value)
            except Exception as exc:  # noqa: BLE001 - tell the person, keep the cause in the log
                log.error("feedback_not_recorded", error=str(exc))
                self._respond(respond, render_notice(
                    "Sorry — I couldn't record your feedback: the turn log is unavailable.", turn_id))
                return
            log.info("feedback_recorded", value=value)
            thanks = "Thanks — noted that this answer helped." if value == "helpful" else (
                "Thanks — noted that this answer did not help; it will be reviewed.")
            self._respond(respond, render_notice(thanks, turn_id))

    def _on_why(self, body: dict, action: dict, respond: Respond) -> None:
        user = (body.get("user") or {}).get("id")
        with self._job(user=user, channel=(body.get("channel") or {}).get("id")):
            self._explain(str(action.get("value", "")), respond)

    def _on_share(self, body: dict, action: dict, respond: Respond) -> None:
        turn_id = str(action.get("value", ""))
        user = (body.get("user") or {}).get("id")
        with self._job(turn_id=turn_id, user=user, channel=(body.get("channel") or {}).get("id")):
            try:
                raw = self.components.turnlog.get_turn(turn_id)
            except Exception as exc:  # noqa: BLE001 - the share path reports it below
                log.error("turn_log_unavailable", error=str(exc))
                raw = None
            if raw is None:
                self._respond(respond, render_notice(
                    f"I can't find turn `{escape(turn_id)}` in the turn log any more, so I can't "
                    "share it. Ask again in the channel by mentioning me."))
                return
            record = LoggedTurn.from_log(raw).record
            for message in render_turn(record, shared_by=user):
                respond(text=message.text, blocks=message.block_dicts(), response_type="in_channel",
                        replace_original=False)
            respond(delete_original=True)
            log.info("turn_shared")


def _ack(ack: Ack) -> None:
    ack()


def build_bot(components: Components, *, client: WebClient | None = None, socket_mode: bool = False,
              listener_workers: int = LISTENER_WORKERS, turn_workers: int = TURN_WORKERS) -> SlackBot:
    """The bot from the components: Redis-backed dedupe, rate limit and recall when configured."""
    settings = components.settings
    client = client or make_client(components)
    identity = fetch_identity(client)
    redis = components.redis
    prefix = settings.redis_prefix
    deduper: Deduper
    limiter: RateLimiter
    recent: RecentTurns
    if redis is not None:
        deduper = RedisDeduper(redis, prefix)
        limiter = RedisRateLimiter(redis, settings.rate_limit_per_minute, prefix)
        recent = RedisRecentTurns(redis, prefix)
    else:
        deduper = InProcessDeduper()
        limiter = InProcessRateLimiter(settings.rate_limit_per_minute)
        recent = InProcessRecentTurns()
    log.info("slack_bot_ready", bot_user_id=identity.bot_user_id, team_id=identity.team_id,
             shared_state=redis is not None, command=settings.slash_command)
    return SlackBot(components, client, identity, deduper=deduper, limiter=limiter, recent=recent,
                    listener_workers=listener_workers, turn_workers=turn_workers,
                    socket_mode=socket_mode)


def serve(components: Components, *, port: int = 3000, socket: bool = False,
          host: str = "0.0.0.0") -> None:
    """`citebot serve`: HTTP mode on `port`, or Socket Mode; SIGTERM drains work in progress."""
    settings = components.settings
    if socket and settings.slack_app_token is None:
        raise ConfigError(
            "Socket Mode needs SLACK_APP_TOKEN: create an app-level token with the "
            "connections:write scope (xapp-…) on the app's Basic Information page")
    bot = build_bot(components, socket_mode=socket)
    warm_up = threading.Thread(target=bot.warm_up, name="citebot-warm-up", daemon=True)
    if socket:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        assert settings.slack_app_token is not None
        handler = SocketModeHandler(bot.app, settings.slack_app_token.get_secret_value())
        try:
            handler.connect()
        except _SLACK_ERRORS as exc:
            bot.close(0)
            raise ConfigError(
                f"Slack refused the Socket Mode connection ({_slack_error(exc)}); check that "
                "SLACK_APP_TOKEN is an app-level token (xapp-…) with connections:write and that "
                "Socket Mode is enabled for the app") from exc
        log.info("slack_socket_mode_connected")
        warm_up.start()
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
        handler.close()
    else:
        server = SlackHttpServer(bot.app, host=host, port=port)
        warm_up.start()
        stopper = threading.Thread(target=server.stop, name="citebot-stop", daemon=True)
        signal.signal(signal.SIGTERM, lambda *_: stopper.ident is None and stopper.start())
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        server.close()
    log.info("slack_draining")
    bot.close()
    log.info("slack_stopped")
