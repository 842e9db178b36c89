"""The one settings object: environment variables (CITEBOT_ prefix) and .env, read once.

Only the entry point (bot.cli) builds it, with load_settings; every component gets what it
needs as plain arguments. Secrets are SecretStr, so they never print. bot/settings_env.py
says where each value comes from; the model here checks it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from bot.settings_env import ENV_FILE, PREFIX, aliases, settings_input
from ingest.limits import (
    MAX_FILE_BYTES,
    MAX_HTML_DEPTH,
    MAX_INFLATED_BYTES,
    MAX_INFLATED_FILE_BYTES,
    MAX_PDF_PAGES,
    MAX_TEXT_CHARS,
    MAX_XML_ELEMENTS,
    MAX_ZIP_MEMBERS,
    Limits,
)
from search.config import read_setting_file, redact_url
from search.errors import ConfigError
from search.links import BadURL, normalise, template_url

if TYPE_CHECKING:
    from ingest.sources import Source

# The schemes each URL setting's client accepts, and the example a message shows.
_URLS: dict[str, tuple[tuple[str, ...], str]] = {
    "es_url": (("http", "https"), "http://localhost:9200"),
    "redis_url": (("redis", "rediss", "unix"), "redis://localhost:6379/0"),
    "anthropic_base_url": (("http", "https"), "https://api.anthropic.com"),
    "slack_api_url": (("http", "https"), "https://slack.com/api/"),
    "admin_url": (("http", "https"), "https://citebot.example.com"),
}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_BLANK_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")
# An admin token's shortest length: 16 characters of `openssl rand -hex 16` output are
# 64 bits, beyond guessing over HTTP (docs/decisions/0040-admin-page.md).
ADMIN_TOKEN_MIN_CHARS = 16
_CHANNEL_ID = re.compile(r"^[CDG][A-Z0-9]{2,}$")
# Slack's workspace (T…) and organisation (E…) ids: letters and digits.
TEAM_ID = re.compile(r"[TE][A-Z0-9]{1,31}")
_INDEX = re.compile(r"[a-z0-9][a-z0-9_-]*")
_CLIENT_ID = re.compile(r"[0-9]+\.[0-9]+")
_SCOPE = re.compile(r"[a-z][a-z_.]*(:[a-z_.]+)*")
# The bot scopes of slack/manifest.yml (tests/test_slack_oauth.py checks they agree): an
# install asks for what the manifest's single-workspace app has.
BOT_SCOPES = (
    "app_mentions:read",
    "chat:write",
    "commands",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "metadata.message:read",
    "channels:read",
    "groups:read",
    "im:read",
    "assistant:write",
)


def _default_store() -> Path:
    return Path.home() / ".local" / "share" / "citebot" / "store"


def _default_cache() -> Path:
    return Path.home() / ".cache" / "citebot"


class Settings(BaseModel):
    """Everything configurable. Unset service URLs select the embedded defaults."""

    # validate_default: a default is checked as a value set would be (the client secret's
    # pairing with the client id, the scopes' form).
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True, validate_default=True)

    store: Path = Field(default_factory=_default_store, description="embedded store directory")
    es_url: str | None = Field(None, description="Elasticsearch URL; unset = embedded store")
    index: str = Field("citebot", description="Elasticsearch alias holding the collection")
    es_api_key: SecretStr | None = None
    es_username: str | None = None
    es_password: SecretStr | None = None
    es_ca_certs: Path | None = None
    es_timeout_s: float = Field(30.0, gt=0, allow_inf_nan=False)
    es_shards: int = Field(1, ge=1, description="primary shards of a new Elasticsearch index")
    redis_url: str | None = Field(None, validation_alias=AliasChoices("REDIS_URL", "CITEBOT_REDIS_URL"))
    redis_prefix: str = Field("citebot:", min_length=1, description="prefix of every Redis key (one per deployment)")
    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "CITEBOT_ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "CITEBOT_ANTHROPIC_BASE_URL")
    )
    anthropic_model: str = "claude-sonnet-5"  # claude-sonnet-4-5 reaches end of life 2026-11-30
    anthropic_max_tokens: int = Field(1024, gt=0)
    anthropic_timeout_s: float = Field(30.0, gt=0, allow_inf_nan=False)
    anthropic_budget_s: float = Field(60.0, gt=0, allow_inf_nan=False)
    claim_judge: bool = False
    glossary: Path | None = Field(None, description="CSV with term,alias[,definition]")
    scopes: Path | None = Field(None, description="TOML file of per-channel scopes (bot/slack/scopes.py); unset = all")
    sources: Path | None = Field(None, description="TOML file of named sources for `citebot sync` (ingest/sources.py)")
    sync_cache: Path | None = Field(
        None,
        description="where `citebot sync` keeps clones and staged sources; default: "
        "STORE/sources, or ~/.cache/citebot/sources/INDEX with Elasticsearch",
    )
    model_dir: Path | None = Field(None, description="embedding model folder; default: bundled")
    cache: Path = Field(
        default_factory=_default_cache, description="built files kept between runs (the encoder's ONNX graphs)"
    )
    # fp32 by default: int8 keeps the fp32 ranking only within its measured loss
    # (docs/decisions/0030-onnx-runtime-encoder.md).
    encoder_precision: str = Field("fp32", description="fp32 or int8 (ONNX Runtime weights)")
    # One thread: under contention from other work it beat two
    # (docs/decisions/0030-onnx-runtime-encoder.md).
    encoder_threads: int = Field(1, ge=1, le=64, description="the encoder's intra-op threads")
    reranker: Path | None = Field(None, description="local CrossEncoder folder; unset = no rerank")
    top_k: int = Field(10, gt=0, le=100)
    passages: int = Field(5, gt=0, le=20, description="passages given to the composer")
    slack_bot_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_BOT_TOKEN", "CITEBOT_SLACK_BOT_TOKEN")
    )
    slack_signing_secret: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "CITEBOT_SLACK_SIGNING_SECRET")
    )
    slack_app_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_APP_TOKEN", "CITEBOT_SLACK_APP_TOKEN")
    )
    slack_api_url: str | None = Field(None, description="Slack Web API base URL (stand-ins)")
    # Installs in many workspaces through OAuth v2 when both are set (Bolt's names; docs/slack.md).
    slack_client_id: str | None = Field(
        None, validation_alias=AliasChoices("SLACK_CLIENT_ID", "CITEBOT_SLACK_CLIENT_ID")
    )
    slack_client_secret: SecretStr | None = Field(
        None, validate_default=True, validation_alias=AliasChoices("SLACK_CLIENT_SECRET", "CITEBOT_SLACK_CLIENT_SECRET")
    )
    slack_scopes: str = Field(
        ",".join(BOT_SCOPES),
        validation_alias=AliasChoices("SLACK_SCOPES", "CITEBOT_SLACK_SCOPES"),
        description="bot scopes an install asks for, comma-separated; default: slack/manifest.yml's",
    )
    # Many workspaces, each its own collection and scopes (bot/team_collections.py): `{team}`
    # is the workspace's id (an org-wide install's: the organisation's), lower-cased in indices.
    store_template: str | None = Field(None, description="embedded store directory per workspace")
    es_index_template: str | None = Field(None, description="Elasticsearch alias per workspace")
    scopes_template: str | None = Field(None, description="scopes TOML file per workspace")
    team: str | None = Field(None, description="the workspace whose collection a command uses")
    slash_command: str = "/ask"
    source_url: str | None = Field(None, description="link template for sources, e.g. https://wiki.example.com/{path}")
    rate_limit_per_minute: int = Field(6, gt=0)
    metrics_port: int = Field(
        9091, ge=0, le=65535, description="Socket Mode: port of /healthz, /readyz and /metrics (0 = off)"
    )
    log_format: str = Field("auto", pattern="^(auto|json|console)$")
    # bot.memory.retention.DEFAULT_RETENTION_DAYS says why 90 (tests/test_retention.py: they agree).
    turn_retention_days: int = Field(
        90, ge=1, le=3650, description="days a turn and its thread state are kept (bot/memory/retention.py)"
    )
    admin_token: SecretStr | None = Field(
        None,
        description="tokens of the /admin page, comma-separated; TOKEN:CHANNEL binds one "
        "to a channel's scope (bot/admin/); unset = /admin is off",
    )
    admin_url: str | None = Field(None, description="the address /admin is reached at, for links")
    gaps_channel: str | None = Field(
        None, description="channel id of the weekly gaps digest (bot/admin/digest.py); unset = none"
    )
    # Per-file limits of `citebot ingest` (ingest/limits.py, beside what set each default).
    ingest_max_bytes: int = Field(MAX_FILE_BYTES, gt=0, description="bytes of one file")
    ingest_max_pages: int = Field(MAX_PDF_PAGES, gt=0, description="pages of one PDF")
    ingest_max_chars: int = Field(MAX_TEXT_CHARS, gt=0, description="extracted characters of one file")
    ingest_max_depth: int = Field(MAX_HTML_DEPTH, gt=0, description="open HTML or XML elements at once")
    ingest_max_inflated_bytes: int = Field(
        MAX_INFLATED_BYTES, gt=0, description="one PDF stream or office zip member, decompressed"
    )
    ingest_max_inflated_file_bytes: int = Field(
        MAX_INFLATED_FILE_BYTES, gt=0, description="all the streams or zip members of one file, decompressed"
    )
    ingest_max_zip_members: int = Field(MAX_ZIP_MEMBERS, gt=0, description="members of one office file's zip")
    ingest_max_xml_elements: int = Field(MAX_XML_ELEMENTS, gt=0, description="XML elements parsed in one office file")

    def sync_folder(self) -> Path:
        """Where `citebot sync` keeps each source's clone and staged documents."""
        if self.sync_cache is not None:
            return self.sync_cache
        if self.es_url:
            return Path.home() / ".cache" / "citebot" / "sources" / self.index
        return self.store / "sources"

    def ingest_limits(self) -> Limits:
        return Limits(
            max_bytes=self.ingest_max_bytes,
            max_pages=self.ingest_max_pages,
            max_chars=self.ingest_max_chars,
            max_depth=self.ingest_max_depth,
            max_inflated_bytes=self.ingest_max_inflated_bytes,
            max_inflated_file_bytes=self.ingest_max_inflated_file_bytes,
            max_zip_members=self.ingest_max_zip_members,
            max_xml_elements=self.ingest_max_xml_elements,
        )

    @field_validator(*_URLS)
    @classmethod
    def _url(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v in (None, ""):
            return None
        schemes, example = _URLS[str(info.field_name)]
        return checked_url(v, schemes, example)

    @field_validator("source_url")
    @classmethod
    def _source_url(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        fix = "write an http(s) address with {path} where the source path goes, e.g. https://wiki.example.com/{path}"
        if not v.startswith(("https://", "http://")) or "{path}" not in v:
            raise ValueError(f"{redact_url(v)!r} is not a link template: {fix}")
        try:
            normalise(template_url(v, "a/b.md"))
        except BadURL:  # its reason quotes the address unmasked: say it here instead
            raise ValueError(
                f"{redact_url(v)!r} gives no usable link (no host, a bad port or a control character?): {fix}"
            ) from None
        return v

    @field_validator(
        "glossary",
        "scopes",
        "sources",
        "sync_cache",
        "es_ca_certs",
        "model_dir",
        "reranker",
        "store",
        "cache",
        mode="before",
    )
    @classmethod
    def _path(cls, v: object) -> object:
        if isinstance(v, str) and not v.strip():  # Path("") would quietly mean "."
            raise ValueError("is set but empty: unset it, or set it to the path")
        return v

    @field_validator("encoder_precision")
    @classmethod
    def _precision(cls, v: str) -> str:
        if v not in ("fp32", "int8"):
            raise ValueError(
                f"{v!r} is not a precision: use fp32 (the default) or int8 "
                "(8-bit weights: smaller, a little less exact)"
            )
        return v

    @field_validator("admin_token")
    @classmethod
    def _admin_token(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None or not v.get_secret_value().strip():
            return None
        admin_tokens(v.get_secret_value())  # raises with what is wrong, never the token
        return v

    @field_validator("gaps_channel")
    @classmethod
    def _gaps_channel(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        if not _CHANNEL_ID.match(v):
            raise ValueError(f"{v!r} is not a channel id: copy it from the channel's details in Slack, e.g. C0123ABCD")
        return v

    @field_validator("slack_client_id")
    @classmethod
    def _client_id(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        if not _CLIENT_ID.fullmatch(v):
            raise ValueError(
                "is not a Slack client id: copy the Client ID (digits and a dot) from the app's Basic Information page"
            )
        return v

    @field_validator("slack_client_secret")
    @classmethod
    def _client_secret(cls, v: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        v = v if v is None or v.get_secret_value().strip() else None  # blank is unset
        if "slack_client_id" not in info.data:  # the id itself was refused: that error says it
            return v
        if info.data["slack_client_id"] and v is None:
            raise ValueError(
                "is not set but SLACK_CLIENT_ID is: set both (the app's Basic "
                "Information page) to install in many workspaces, or neither"
            )
        if v is not None and not info.data["slack_client_id"]:
            raise ValueError("is set but SLACK_CLIENT_ID is not: set both, or neither")
        return v

    @field_validator("slack_scopes")
    @classmethod
    def _scopes(cls, v: str) -> str:
        scopes = [s.strip() for s in v.split(",")]
        bad = [s for s in scopes if not _SCOPE.fullmatch(s)]
        if bad:
            raise ValueError(
                f"{bad[0]!r} is not a scope: write bot scopes separated by commas, e.g. app_mentions:read,chat:write"
            )
        return ",".join(scopes)

    @field_validator("store_template", "es_index_template", "scopes_template")
    @classmethod
    def _template(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v in (None, ""):
            return None
        if v.count("{team}") < 1 or v.replace("{team}", "").count("{") + v.replace("{team}", "").count("}"):
            raise ValueError(
                f"{v!r} is not a template: write {{team}} where the workspace id goes "
                "and no other braces, e.g. citebot-{team}"
            )
        if info.field_name == "es_index_template" and not _INDEX.fullmatch(v.replace("{team}", "t")):
            raise ValueError(
                f"{v!r} gives no Elasticsearch alias: use lower-case letters, digits, "
                "'-' and '_', e.g. citebot-{team}"
            )
        return v

    @field_validator("team")
    @classmethod
    def _team(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        if not TEAM_ID.fullmatch(v):
            raise ValueError(f"{v!r} is not a Slack workspace or organisation id, e.g. T0123ABCD")
        return v

    def for_team(self, team: str) -> Settings:
        """These settings with the workspace's collection and scopes (the templates'), or
        ConfigError for an id that is not Slack's (it becomes part of a path)."""
        if not TEAM_ID.fullmatch(team):
            raise ConfigError(f"{team!r} is not a Slack workspace or organisation id")
        update: dict[str, Any] = {}
        if self.store_template:
            update["store"] = Path(self.store_template.replace("{team}", team))
        if self.es_index_template:
            update["index"] = self.es_index_template.replace("{team}", team.lower())
        if self.scopes_template:
            update["scopes"] = Path(self.scopes_template.replace("{team}", team))
        return self.model_copy(update=update)

    def per_team(self) -> bool:
        """Each workspace has its own collection or scopes (a template is set)."""
        return bool(self.store_template or self.es_index_template or self.scopes_template)

    def oauth_enabled(self) -> bool:
        """Installs through OAuth v2 (many workspaces) rather than one SLACK_BOT_TOKEN."""
        return self.slack_client_id is not None

    @field_validator("slash_command")
    @classmethod
    def _slash(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("a slash command starts with '/', e.g. /ask")
        return v


def load_settings(**overrides: Any) -> Settings:
    """Read the settings once; a bad value fails here with its variable name and the fix."""
    if ENV_FILE.is_file():  # python-dotenv would raise a bare UnicodeDecodeError
        read_setting_file(ENV_FILE, str(ENV_FILE), "a file of NAME=value lines, or remove it")
    try:
        return Settings(**settings_input(Settings.model_fields, overrides))
    except ValidationError as exc:
        # Only each error's message, never its input (a URL's password, a token); and not
        # chained, since the ValidationError's own text quotes the inputs.
        problems = [
            f"{env_name(str(err['loc'][0]) if err['loc'] else '')}: " + err["msg"].removeprefix("Value error, ")
            for err in exc.errors()
        ]
        raise ConfigError("bad setting: " + "; ".join(problems)) from None


def admin_tokens(value: str) -> list[tuple[str, str | None]]:
    """CITEBOT_ADMIN_TOKEN read: each comma-separated entry is a token, or TOKEN:CHANNEL for
    one that shows only that channel's turns and what its scope may read. ValueError says
    which entry is wrong and why, without quoting any token."""
    out: list[tuple[str, str | None]] = []
    for n, entry in enumerate(value.split(","), 1):
        token, _, channel = entry.strip().partition(":")
        if len(token) < ADMIN_TOKEN_MIN_CHARS or _BLANK_OR_CONTROL.search(token):
            raise ValueError(
                f"entry {n}: a token is at least {ADMIN_TOKEN_MIN_CHARS} characters "
                "with no space (make one with `openssl rand -hex 16`)"
            )
        if channel and not _CHANNEL_ID.match(channel):
            raise ValueError(f"entry {n}: after ':' comes a channel id such as C0123ABCD")
        out.append((token, channel or None))
    if len({t for t, _ in out}) != len(out):
        raise ValueError("a token appears twice: give each channel its own token")
    return out


def source_tokens(sources: list[Source]) -> dict[str, str]:
    """The token of each source that names one (`token_env`), read from the environment here
    (only bot/settings.py reads it); a variable that is unset or empty stops the start."""
    tokens = {}
    for s in sources:
        if s.token_env is None:
            continue
        value = os.environ.get(s.token_env, "").strip()
        if not value:
            raise ConfigError(
                f"bad setting: CITEBOT_SOURCES: source {s.name}: token_env names "
                f"{s.token_env}, which is not set; fix: export {s.token_env}=<token> "
                "(a token with read access to the repository), or drop token_env"
            )
        tokens[s.name] = value
    return tokens


def checked_url(value: str, schemes: tuple[str, ...], example: str) -> str:
    """The value when it is a URL of one of `schemes` with a numeric port; ValueError
    otherwise, quoting the value with its credentials masked (search.config.redact_url)."""
    shown = repr(redact_url(value))
    if _BLANK_OR_CONTROL.search(value):
        raise ValueError(
            f"{shown} holds a space or control character (a stray quote or line "
            f"break?); write just the URL, e.g. {example}"
        )
    m = _SCHEME.match(value)
    if not m:
        raise ValueError(f"{shown} is not a URL (expected e.g. {example})")
    if m.group(1) not in schemes:
        raise ValueError(
            f"{shown} starts with {m.group(1)}://, which this setting does not "
            f"take: use {' or '.join(s + '://' for s in schemes)}, e.g. {example}"
        )
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  # parsing the port is the check
    except ValueError:  # its text quotes the port, which may be a password: not shown
        raise ValueError(
            f"{shown} has no valid host and port: the port after the host's ':' "
            f"must be a number from 0 to 65535, e.g. {example}"
        ) from None
    if not parts.hostname and m.group(1) in ("http", "https"):  # redis:// defaults to localhost
        raise ValueError(f"{shown} names no host, e.g. {example}")
    return value


def env_name(field: str) -> str:
    """The environment variable a person sets for a field (or one of its aliases), e.g.
    redis_url -> REDIS_URL, not CITEBOT_REDIS_URL."""
    for name, info in Settings.model_fields.items():
        choices = aliases(info)
        if field == name or field in choices:
            return choices[0] if choices else PREFIX + name.upper()
    return field.upper() if field.isupper() else PREFIX + field.upper()
