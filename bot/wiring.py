"""Builds citebot's components from the settings, once, for the CLI and the server.

This is the one place that chooses between the real services and the one-machine
defaults: Elasticsearch or the embedded store, Redis or in-process state, Claude or the
extractive composer. Everything below it receives what it uses as plain arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from bot.settings import Settings
from search.config import redact_url, scrub
from search.errors import CitebotError, ConfigError, StoreError

# Imported where used, so a command pays only for what it needs: `citebot chunks` never
# loads Slack, Redis or the answer pipeline (python -X importtime: bot.cli took 5.0 s
# under load with everything imported here, most of it slack_bolt, redis and numpy).
if TYPE_CHECKING:
    from collections.abc import Callable

    import redis

    from bot.answer.compose import Composer
    from bot.answer.turn import Answerer
    from bot.memory.state import ConversationState
    from bot.memory.turnlog import TurnLog
    from bot.slack.bot import SlackBot
    from bot.slack.dedupe import Deduper
    from bot.slack.inbound import Identity
    from bot.slack.ratelimit import RateLimiter
    from bot.slack.recall_memo import RecallMemo
    from bot.slack.recent import RecentTurns
    from bot.slack.scopes import Scopes
    from bot.slack.viewing import Viewing
    from bot.team_collections import TeamCollections
    from ingest.embedder import Embedder
    from ingest.sources import Source
    from search.glossary import Glossary
    from search.retrieval_config import RetrievalConfig
    from search.retrieve import Retriever
    from search.store import Store


def open_store(settings: Settings) -> Store:
    """Elasticsearch when CITEBOT_ES_URL is set, else the embedded store."""
    if settings.es_url:
        from search.elastic import ElasticStore, connect

        return ElasticStore(
            connect(
                settings.es_url,
                api_key=settings.es_api_key.get_secret_value() if settings.es_api_key else None,
                username=settings.es_username,
                password=settings.es_password.get_secret_value() if settings.es_password else None,
                ca_certs=str(settings.es_ca_certs) if settings.es_ca_certs else None,
                timeout_s=settings.es_timeout_s,
            ),
            alias=settings.index,
            shards=settings.es_shards,
        )
    from search.embedded import EmbeddedStore

    return EmbeddedStore(settings.store)


@dataclass
class Components:
    """Lazily built: a command that only lists chunks never loads the model."""

    settings: Settings
    # Many workspaces with a collection each (bot/team_collections.py), set by build_bot.
    team_collections: TeamCollections | None = None

    def __post_init__(self) -> None:
        if self.settings.team:  # CITEBOT_TEAM: that workspace's collection and scopes
            self.settings = self.settings.for_team(self.settings.team)

    @cached_property
    def store(self) -> Store:
        return open_store(self.settings)

    @cached_property
    def embedder(self) -> Embedder:
        from ingest.embedder import Embedder

        s = self.settings
        return Embedder(s.model_dir, precision=s.encoder_precision, threads=s.encoder_threads, cache_dir=s.cache)

    @cached_property
    def glossary(self) -> Glossary:
        from search.glossary import Glossary

        return Glossary.load(self.settings.glossary) if self.settings.glossary else Glossary.empty()

    @cached_property
    def reranker(self):
        if self.settings.reranker is None:
            return None
        from search.rerank import CrossEncoderReranker

        return CrossEncoderReranker(self.settings.reranker)

    @cached_property
    def scopes(self) -> Scopes:
        """CITEBOT_SCOPES, checked; a bad file stops here with its line and the fix."""
        from bot.slack.scopes import Scopes, load_scopes

        return load_scopes(self.settings.scopes) if self.settings.scopes else Scopes.everything()

    @cached_property
    def sources(self) -> list[Source]:
        """CITEBOT_SOURCES, checked (and each source's token there); a bad file stops here
        with its line and the fix. Empty when the setting is unset."""
        from bot.settings import source_tokens
        from ingest.sources import load_sources

        if self.settings.sources is None:
            return []
        sources = load_sources(self.settings.sources)
        self.source_tokens = source_tokens(sources)
        return sources

    source_tokens: dict[str, str] = field(default_factory=dict, repr=False)

    def retrieval_config(self) -> RetrievalConfig:
        from search.retrieval_config import RetrievalConfig

        return RetrievalConfig(top_k=self.settings.top_k, rerank=self.settings.reranker is not None)

    def retriever(self, config: RetrievalConfig | None = None) -> Retriever:
        from search.retrieve import Retriever

        glossary = self.glossary  # a bad CITEBOT_GLOSSARY fails before the model loads
        store = self.reading_store()
        return Retriever(
            store, self.embedder.encode_query, glossary, config or self.retrieval_config(), reranker=self.reranker
        )

    def reading_store(self) -> Store:
        """The store, checked: not empty, built by the configured model."""
        store = self.store
        stamp = store.stamp()
        if stamp is None or store.chunk_count() == 0:
            raise StoreError(
                "the store is empty: run `citebot ingest PATH` first"
                + (f" (store: {self.settings.store})" if not self.settings.es_url else "")
            )
        store.open_for(self.embedder.stamp)
        return store

    # -- state: Redis when REDIS_URL is set, else this process -------------------------------
    @cached_property
    def redis(self) -> redis.Redis | None:
        if not self.settings.redis_url:
            return None
        from bot.memory.redis import connect as redis_connect

        url = self.settings.redis_url
        try:
            return redis_connect(url)
        except ValueError as exc:  # a query argument redis-py refuses, e.g. ?socket_timeout=x
            raise ConfigError(
                f"bad setting: REDIS_URL: cannot use {redact_url(url)!r}: {scrub(str(exc), url)}"
            ) from None

    @property
    def prefix(self) -> str:
        return self.settings.redis_prefix

    @cached_property
    def turnlog(self) -> TurnLog:
        from bot.memory.retention import ExpiringTurnLog
        from search.embedded import EmbeddedStore

        days = self.settings.turn_retention_days
        if self.redis is not None:
            from bot.memory.turnlog import RedisTurnLog

            return RedisTurnLog(self.redis, prefix=self.prefix, ttl_s=days * 24 * 3600)
        if isinstance(self.store, EmbeddedStore):
            return ExpiringTurnLog(self.store, days)
        # turns beside an Elasticsearch collection
        return ExpiringTurnLog(EmbeddedStore(self.settings.store), days)

    @cached_property
    def state(self) -> ConversationState:
        from bot.memory.state import InProcessState, RedisState, thread_ttl_s

        ttl_s = thread_ttl_s(self.settings.turn_retention_days)
        if self.redis is None:
            return InProcessState(ttl_s=ttl_s)
        return RedisState(self.redis, prefix=self.prefix + "thread:", ttl_s=ttl_s)

    @cached_property
    def deduper(self) -> Deduper:
        from bot.slack.dedupe import InProcessDeduper, RedisDeduper

        return InProcessDeduper() if self.redis is None else RedisDeduper(self.redis, self.prefix)

    @cached_property
    def limiter(self) -> RateLimiter:
        from bot.slack.ratelimit import InProcessRateLimiter, RedisRateLimiter

        per_minute = self.settings.rate_limit_per_minute
        if self.redis is None:
            return InProcessRateLimiter(per_minute)
        return RedisRateLimiter(self.redis, per_minute, self.prefix)

    @cached_property
    def recent(self) -> RecentTurns:
        from bot.slack.recent import LAST_TURN_TTL_S, InProcessRecentTurns, RedisRecentTurns

        if self.redis is None:
            return InProcessRecentTurns()
        ttl_s = min(LAST_TURN_TTL_S, self.settings.turn_retention_days * 24 * 3600)
        return RedisRecentTurns(self.redis, self.prefix, ttl_s=ttl_s)

    @cached_property
    def recall_memo(self) -> RecallMemo:
        from bot.slack.recall_memo import InProcessRecallMemo, RedisRecallMemo

        return InProcessRecallMemo() if self.redis is None else RedisRecallMemo(self.redis, self.prefix)

    @cached_property
    def viewing(self) -> Viewing:
        from bot.slack.viewing import InProcessViewing, RedisViewing

        return InProcessViewing() if self.redis is None else RedisViewing(self.redis, self.prefix)

    # -- answering ---------------------------------------------------------------------------
    def composer(self) -> Composer:
        from bot.answer.compose import ExtractiveComposer

        # Its few candidates each run alone (Embedder.encode_each): batched, half was padding.
        extractive = ExtractiveComposer(self.embedder.encode_each, encode_query=self.embedder.encode_query)
        if self.settings.anthropic_api_key is None:
            return extractive
        from bot.answer.claude import ClaudeComposer

        return ClaudeComposer.from_settings(self.settings, fallback=extractive)

    @cached_property
    def answerer(self) -> Answerer:
        return self.make_answerer(self.retriever(), self.turnlog, self.state)

    def make_answerer(self, retriever: Retriever, turnlog: TurnLog, state: ConversationState | None = None) -> Answerer:
        """An Answerer on this retriever and turn log (eval gives its own of both)."""
        from bot.answer.gate import Gate
        from bot.answer.turn import Answerer
        from bot.memory.state import InProcessState

        composer = self.composer()
        return Answerer(
            retriever,
            composer,
            turnlog,
            state or InProcessState(),
            passages=self.settings.passages,
            gate=Gate.for_model(self.embedder.stamp.name),
            condenser=getattr(composer, "condense", None),
            claim_judge=getattr(composer, "claim_judge", None),
            source_url=self.settings.source_url,
        )

    def readiness(self) -> dict[str, str]:
        """What /readyz reports: each check "ok" or what is wrong. Cheap enough for a probe
        every few seconds; it never loads the model itself (warm-up does)."""
        if self.team_collections is not None:
            return self.team_collections.readiness()
        checks: dict[str, str] = {}
        if "answerer" not in self.__dict__:
            checks["model"] = "loading (the model and store open at start-up)"
        else:
            checks["model"] = "ok"
            try:
                stamp = self.store.stamp()
                served = stamp is not None and self.embedder.stamp.serves(stamp)  # as opening it judges
                checks["store"] = "ok" if served and self.store.chunk_count() else "empty or built with another model"
            except CitebotError as exc:
                checks["store"] = str(exc)
        if self.redis is not None:
            from bot.memory.redis import redis_errors

            try:
                with redis_errors("answer a ping"):
                    self.redis.ping()
                checks["redis"] = "ok"
            except CitebotError as exc:
                checks["redis"] = str(exc)
        return checks


def build_bot(
    components: Components,
    *,
    client=None,
    socket_mode: bool = False,
    listener_workers: int | None = None,
    turn_workers: int | None = None,
) -> SlackBot:
    """The Slack bot from the components: Redis-backed dedupe, rate limit and recall when
    configured, in-process otherwise; worker counts default to bot.slack.pool's."""
    import structlog

    from bot.slack.bot import BotConfig, SlackBot
    from bot.slack.client import fetch_identity, make_client
    from bot.slack.pool import LISTENER_WORKERS, TURN_WORKERS

    listener_workers = LISTENER_WORKERS if listener_workers is None else listener_workers
    turn_workers = TURN_WORKERS if turn_workers is None else turn_workers
    settings = components.settings
    scopes = components.scopes  # before anything else: a bad scopes file stops the start
    many = None
    answerer: Callable[[], Answerer]
    identity: Identity
    turnlog: TurnLog
    if settings.oauth_enabled():  # many workspaces through OAuth v2: bot.slack.many
        from bot.slack.many import many_workspaces

        many = many_workspaces(components, client)
        client, identity, turnlog = many.client, many.identity, many.turnlog
        if settings.per_team():  # each workspace its own collection and scopes
            from bot.team_collections import TeamCollections, TeamScopes

            components.team_collections = TeamCollections(components)
            answerer, scopes = components.team_collections.answerer, TeamScopes(components.team_collections)
    else:
        client = client or make_client(settings.slack_bot_token, settings.slack_api_url)
        identity, turnlog = fetch_identity(client), components.turnlog
    if components.team_collections is None:
        answerer = lambda: components.answerer  # one collection for every question
    secret = settings.slack_signing_secret
    config = BotConfig(
        signing_secret=secret.get_secret_value() if secret else None,
        slash_command=settings.slash_command,
        rate_limit_per_minute=settings.rate_limit_per_minute,
        socket_mode=socket_mode,
        listener_workers=listener_workers,
        turn_workers=turn_workers,
        source_url=settings.source_url,
        stream_answers=settings.anthropic_api_key is not None,
    )
    bot = SlackBot(
        config,
        client,
        identity,
        answerer=answerer,
        state=components.state,
        turnlog=turnlog,
        deduper=components.deduper,
        limiter=components.limiter,
        recent=components.recent,
        scopes=scopes,
        recall_memo=components.recall_memo,
        oauth_settings=many.settings if many else None,
        viewing=components.viewing,
    )
    if many is not None:
        many.attach(bot.app, components.state)
    structlog.get_logger("citebot.slack").info(
        "slack_bot_ready",
        bot_user_id=identity.bot_user_id,
        team_id=identity.team_id,
        shared_state=components.redis is not None,
        command=settings.slash_command,
        scopes=scopes.describe(),
    )
    return bot


def serve(components: Components, *, port: int = 3000, socket: bool = False, host: str = "0.0.0.0") -> None:
    """`citebot serve`: HTTP mode on `port`, or Socket Mode; SIGTERM drains work in progress."""
    from bot.slack.serve import run

    settings = components.settings
    if socket and settings.oauth_enabled():
        raise ConfigError(
            "Socket Mode cannot serve Slack's install pages (/slack/install): unset "
            "SLACK_CLIENT_ID and SLACK_CLIENT_SECRET, or serve in HTTP mode (docs/slack.md)"
        )
    if socket and settings.slack_app_token is None:
        raise ConfigError(
            "Socket Mode needs SLACK_APP_TOKEN: create an app-level token with the "
            "connections:write scope (xapp-…) on the app's Basic Information page"
        )
    from bot.admin.setup import admin_for, digest_for

    bot = build_bot(components, socket_mode=socket)
    digest = digest_for(components, bot.client)  # the weekly gaps digest, when configured
    if digest is not None:
        digest.start()
    try:
        run(
            bot,
            port=port,
            host=host,
            socket=socket,
            app_token=settings.slack_app_token,
            probe_port=settings.metrics_port,
            readiness=components.readiness,
            admin=admin_for(components),
        )
    finally:
        if digest is not None:
            digest.stop()
