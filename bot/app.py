"""Builds citebot's components from the settings, once, for the CLI and the server."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from bot.compose import Composer, ExtractiveComposer
from bot.settings import Settings
from bot.state import ConversationState, InProcessState, RedisState
from bot.turn import Answerer, TurnLog
from ingest.embedder import Embedder
from search.embedded import EmbeddedStore
from search.errors import ConfigError, StoreError
from search.glossary import Glossary
from search.retrieve import RetrievalConfig, Retriever
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
        )
    return EmbeddedStore(settings.store)


def redis_client(settings: Settings):
    import redis

    if not settings.redis_url:
        return None
    return redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)


@dataclass
class Components:
    """Lazily built: a command that only lists chunks never loads the model."""

    settings: Settings
    overrides: dict = field(default_factory=dict)

    @cached_property
    def store(self) -> Store:
        return open_store(self.settings)

    @cached_property
    def embedder(self) -> Embedder:
        return Embedder(self.settings.model_dir)

    @cached_property
    def glossary(self) -> Glossary:
        return Glossary.load(self.settings.glossary) if self.settings.glossary else Glossary.empty()

    @cached_property
    def reranker(self):
        if self.settings.reranker is None:
            return None
        from search.rerank import CrossEncoderReranker

        return CrossEncoderReranker(self.settings.reranker)

    def retrieval_config(self) -> RetrievalConfig:
        return RetrievalConfig(top_k=self.settings.top_k, rerank=self.settings.reranker is not None)

    def retriever(self, config: RetrievalConfig | None = None) -> Retriever:
        store = self.reading_store()
        return Retriever(store, self.embedder.encode_query, self.glossary,
                         config or self.retrieval_config(), reranker=self.reranker)

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

    @cached_property
    def redis(self):
        return redis_client(self.settings)

    @cached_property
    def turnlog(self) -> TurnLog:
        if self.redis is not None:
            from bot.turnlog import RedisTurnLog

            return RedisTurnLog(self.redis, prefix=self.settings.redis_prefix)
        if isinstance(self.store, EmbeddedStore):
            return self.store
        return EmbeddedStore(self.settings.store)  # turns beside an Elasticsearch collection

    @cached_property
    def state(self) -> ConversationState:
        if self.redis is None:
            return InProcessState()
        return RedisState(self.redis, prefix=self.settings.redis_prefix + "thread:")

    def composer(self) -> Composer:
        extractive = ExtractiveComposer(self.embedder.encode_texts)
        if self.settings.anthropic_api_key is None:
            return extractive
        try:
            from bot.claude import ClaudeComposer
        except ImportError as exc:  # pragma: no cover
            raise ConfigError("ANTHROPIC_API_KEY is set but the composer is unavailable") from exc
        return ClaudeComposer.from_settings(self.settings, fallback=extractive)

    @cached_property
    def answerer(self) -> Answerer:
        composer = self.composer()
        return Answerer(
            self.retriever(), composer, self.turnlog, self.state,
            passages=self.settings.passages,
            condenser=getattr(composer, "condense", None),
            claim_judge=getattr(composer, "claim_judge", None),
        )
