"""The one settings object: environment variables (CITEBOT_ prefix) and .env, read once.

Only the entry point (bot.cli) builds it; every component gets what it needs as plain
arguments. Secrets are SecretStr, so they never print.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ingest.limits import (
    MAX_FILE_BYTES,
    MAX_HTML_DEPTH,
    MAX_INFLATED_BYTES,
    MAX_INFLATED_FILE_BYTES,
    MAX_PDF_PAGES,
    MAX_TEXT_CHARS,
    Limits,
)
from search.errors import ConfigError


def _default_store() -> Path:
    return Path.home() / ".local" / "share" / "citebot" / "store"


class Settings(BaseSettings):
    """Everything configurable. Unset service URLs select the embedded defaults."""

    model_config = SettingsConfigDict(
        env_prefix="CITEBOT_", env_file=".env", env_file_encoding="utf-8",
        extra="ignore", frozen=True, populate_by_name=True,
    )

    store: Path = Field(default_factory=_default_store, description="embedded store directory")
    es_url: str | None = Field(None, description="Elasticsearch URL; unset = embedded store")
    index: str = Field("citebot", description="Elasticsearch alias holding the collection")
    es_api_key: SecretStr | None = None
    es_username: str | None = None
    es_password: SecretStr | None = None
    es_ca_certs: Path | None = None
    es_timeout_s: float = 30.0
    es_shards: int = Field(1, ge=1, description="primary shards of a new Elasticsearch index")
    redis_url: str | None = Field(
        None, validation_alias=AliasChoices("REDIS_URL", "CITEBOT_REDIS_URL"))
    redis_prefix: str = Field(
        "citebot:", min_length=1, description="prefix of every Redis key (one per deployment)")
    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "CITEBOT_ANTHROPIC_API_KEY"))
    anthropic_base_url: str | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "CITEBOT_ANTHROPIC_BASE_URL"))
    anthropic_model: str = "claude-sonnet-5"  # claude-sonnet-4-5 reaches end of life 2026-11-30
    anthropic_max_tokens: int = Field(1024, gt=0)
    anthropic_timeout_s: float = Field(30.0, gt=0)
    anthropic_budget_s: float = Field(60.0, gt=0)
    claim_judge: bool = False
    glossary: Path | None = Field(None, description="CSV with term,alias[,definition]")
    scopes: Path | None = Field(
        None, description="TOML file of per-channel scopes (bot/slack/scopes.py); unset = all")
    model_dir: Path | None = Field(None, description="embedding model folder; default: bundled")
    reranker: Path | None = Field(None, description="local CrossEncoder folder; unset = no rerank")
    top_k: int = Field(10, gt=0, le=100)
    passages: int = Field(5, gt=0, le=20, description="passages given to the composer")
    slack_bot_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_BOT_TOKEN", "CITEBOT_SLACK_BOT_TOKEN"))
    slack_signing_secret: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "CITEBOT_SLACK_SIGNING_SECRET"))
    slack_app_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_APP_TOKEN", "CITEBOT_SLACK_APP_TOKEN"))
    slack_api_url: str | None = Field(None, description="Slack Web API base URL (stand-ins)")
    slash_command: str = "/ask"
    source_url: str | None = Field(
        None, description="link template for sources, e.g. https://wiki.example.com/{path}")
    rate_limit_per_minute: int = Field(6, gt=0)
    metrics_port: int = Field(
        9091, ge=0, le=65535,
        description="Socket Mode: port of /healthz, /readyz and /metrics (0 = off)")
    log_format: str = Field("auto", pattern="^(auto|json|console)$")
    # Per-file limits of `citebot ingest` (ingest/limits.py, beside what set each default).
    ingest_max_bytes: int = Field(MAX_FILE_BYTES, gt=0, description="bytes of one file")
    ingest_max_pages: int = Field(MAX_PDF_PAGES, gt=0, description="pages of one PDF")
    ingest_max_chars: int = Field(MAX_TEXT_CHARS, gt=0, description="extracted characters of one file")
    ingest_max_depth: int = Field(MAX_HTML_DEPTH, gt=0, description="open HTML elements at once")
    ingest_max_inflated_bytes: int = Field(
        MAX_INFLATED_BYTES, gt=0, description="one PDF stream, decompressed")
    ingest_max_inflated_file_bytes: int = Field(
        MAX_INFLATED_FILE_BYTES, gt=0, description="all the streams of one PDF, decompressed")

    def ingest_limits(self) -> Limits:
        return Limits(max_bytes=self.ingest_max_bytes, max_pages=self.ingest_max_pages,
                      max_chars=self.ingest_max_chars, max_depth=self.ingest_max_depth,
                      max_inflated_bytes=self.ingest_max_inflated_bytes,
                      max_inflated_file_bytes=self.ingest_max_inflated_file_bytes)

    @field_validator("es_url", "slack_api_url", "anthropic_base_url", "redis_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        if "://" not in v:
            raise ValueError(f"{v!r} is not a URL (expected e.g. http://localhost:9200)")
        return v

    @field_validator("source_url")
    @classmethod
    def _source_url(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        if not v.startswith(("https://", "http://")) or "{path}" not in v:
            raise ValueError(f"{v!r} is not a link template: write an http(s) address with "
                             "{path} where the source path goes, e.g. https://wiki.example.com/{path}")
        return v

    @field_validator("slash_command")
    @classmethod
    def _slash(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("a slash command starts with '/', e.g. /ask")
        return v


def load_settings(**overrides: object) -> Settings:
    """Read the settings once; a bad value fails here with its variable name and the fix."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = [f"{env_name(str(err['loc'][0]) if err['loc'] else '')}: {err['msg']}"
                    for err in exc.errors()]
        raise ConfigError("bad setting: " + "; ".join(problems)) from exc


def env_name(field: str) -> str:
    """The environment variable a person sets for a field (or one of its aliases), e.g.
    redis_url -> REDIS_URL, not CITEBOT_REDIS_URL."""
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else []
        if field == name or field in choices:
            return choices[0] if choices else "CITEBOT_" + name.upper()
    return field.upper() if field.isupper() else "CITEBOT_" + field.upper()
