"""Where citebot keeps its Slack installations and OAuth states when it installs in many
workspaces (docs/slack.md, "Installing in many workspaces").

slack_sdk's InstallationStore and OAuthStateStore interfaces, which Bolt's OAuth flow and
authorize call, over one of two backends:
- Redis when REDIS_URL is set (every replica sees the same installs): one hash per owner,
  `<prefix>slack:install:<owner>`, and one key per state with the state's expiry as TTL;
- else the embedded store's tables (m010 in search/embedded_migrations.py).

An owner is a workspace, or an organisation for an org-wide (Enterprise Grid) install, whose
events then find it by enterprise id alone. Its fields: `bot` (what every request's token
comes from), `latest` (the last installer's installation) and `user:<id>` (each installer's).
What is kept, and for how long: docs/data.md.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from slack_sdk.oauth.installation_store import Bot, Installation, InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore

from bot.memory.redis import redis_errors

if TYPE_CHECKING:
    import redis

    from search.embedded import EmbeddedStore

log = logging.getLogger("citebot.slack.installs")

# Bolt's default: a person has ten minutes between opening /slack/install and coming back
# from Slack's consent page (docs/decisions/0042-many-workspaces.md).
STATE_TTL_S = 600
BOT = "bot"
LATEST = "latest"


def owner_key(enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False) -> str:
    """The owner an install belongs to: the organisation for an org-wide install, else the
    workspace (with its organisation, if any)."""
    if is_enterprise_install:
        team_id = None
    return f"{enterprise_id or '-'}/{team_id or '-'}"


def installation_owner(installation: Installation | Bot) -> str:
    return owner_key(installation.enterprise_id, installation.team_id, installation.is_enterprise_install)


def _encode(model: Installation | Bot) -> str:
    def plain(value: Any) -> Any:
        if isinstance(value, datetime):
            return value.isoformat()
        raise TypeError(f"{type(value).__name__} is not JSON")

    return json.dumps(model.to_dict_for_copying(), default=plain)


class Rows(Protocol):
    """Keyed text rows: what both backends offer."""

    def put(self, owner: str, rows: dict[str, str]) -> None: ...
    def get(self, owner: str, field: str) -> str | None: ...
    def get_many(self, owner: str, fields: tuple[str, ...]) -> dict[str, str]: ...
    def fields(self, owner: str) -> list[str]: ...
    def delete(self, owner: str, fields: tuple[str, ...] | None = None) -> int: ...
    def owners(self) -> list[str]: ...


class RowsInstallationStore(InstallationStore):
    """slack_sdk's InstallationStore over keyed rows (the bot, the latest installer, each
    installer of an owner)."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows

    @property
    def logger(self) -> logging.Logger:
        return log

    def save(self, installation: Installation) -> None:
        owner = installation_owner(installation)
        data = _encode(installation)
        fields = {LATEST: data, BOT: _encode(installation.to_bot())} if installation.bot_token else {LATEST: data}
        if installation.user_id:
            fields[f"user:{installation.user_id}"] = data
        self.rows.put(owner, fields)

    def save_bot(self, bot: Bot) -> None:
        self.rows.put(installation_owner(bot), {BOT: _encode(bot)})

    def find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        raw = self.rows.get(owner_key(enterprise_id, team_id, is_enterprise_install), BOT)
        return None if raw is None else Bot(**json.loads(raw))

    def find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        owner = owner_key(enterprise_id, team_id, is_enterprise_install)
        field = f"user:{user_id}" if user_id else LATEST
        # Read with the bot's own row, in one read: it holds the freshest bot token (a
        # refresh by find_bot saves only it).
        raws = self.rows.get_many(owner, (field, BOT))
        if field not in raws:
            return None
        installation = Installation(**json.loads(raws[field]))
        if BOT in raws:
            _take_bot(installation, Bot(**json.loads(raws[BOT])))
        return installation

    def delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        self.rows.delete(owner_key(enterprise_id, team_id), (BOT,))

    def delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        owner = owner_key(enterprise_id, team_id)
        if user_id:
            self.rows.delete(owner, (f"user:{user_id}",))
        else:
            self.rows.delete(owner, tuple(f for f in self.rows.fields(owner) if f != BOT))

    def delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        self.rows.delete(owner_key(enterprise_id, team_id))

    def owners(self) -> list[str]:
        return self.rows.owners()


def _take_bot(installation: Installation, bot: Bot) -> None:
    installation.bot_token = bot.bot_token
    installation.bot_refresh_token = bot.bot_refresh_token
    installation.bot_token_expires_at = bot.bot_token_expires_at
    installation.bot_scopes = bot.bot_scopes


# -- backends ----------------------------------------------------------------------------
class RedisRows:
    """One hash per owner under `<prefix>slack:install:`."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix + "slack:install:"

    def put(self, owner: str, rows: dict[str, str]) -> None:
        with redis_errors("save a Slack installation"):
            self.client.hset(self.prefix + owner, mapping=rows)  # type: ignore[arg-type]

    def get(self, owner: str, field: str) -> str | None:
        with redis_errors("read a Slack installation"):
            raw = self.client.hget(self.prefix + owner, field)
        return None if raw is None else (raw.decode() if isinstance(raw, bytes) else str(raw))

    def get_many(self, owner: str, fields: tuple[str, ...]) -> dict[str, str]:
        with redis_errors("read a Slack installation"):
            raws = self.client.hmget(self.prefix + owner, list(fields))
        return {f: (r.decode() if isinstance(r, bytes) else str(r)) for f, r in zip(fields, raws) if r is not None}

    def fields(self, owner: str) -> list[str]:
        with redis_errors("read a Slack installation"):
            keys = self.client.hkeys(self.prefix + owner)
        return [k.decode() if isinstance(k, bytes) else str(k) for k in keys]

    def delete(self, owner: str, fields: tuple[str, ...] | None = None) -> int:
        with redis_errors("delete a Slack installation"):
            if fields is None:
                return int(self.client.delete(self.prefix + owner))
            return int(self.client.hdel(self.prefix + owner, *fields)) if fields else 0

    def owners(self) -> list[str]:
        with redis_errors("list Slack installations"):
            keys = list(self.client.scan_iter(match=self.prefix + "*", count=500))
        return sorted((k.decode() if isinstance(k, bytes) else str(k))[len(self.prefix) :] for k in keys)


class EmbeddedRows:
    """The embedded store's slack_installs table."""

    def __init__(self, store: EmbeddedStore) -> None:
        self.store = store

    def put(self, owner: str, rows: dict[str, str]) -> None:
        self.store.put_install_rows(owner, rows)

    def get(self, owner: str, field: str) -> str | None:
        return self.store.get_install_row(owner, field)

    def get_many(self, owner: str, fields: tuple[str, ...]) -> dict[str, str]:
        return self.store.get_install_rows(owner, fields)

    def fields(self, owner: str) -> list[str]:
        return self.store.install_fields(owner)

    def delete(self, owner: str, fields: tuple[str, ...] | None = None) -> int:
        return self.store.delete_install_rows(owner, fields)

    def owners(self) -> list[str]:
        return self.store.install_owners()


# -- OAuth states ------------------------------------------------------------------------
class RedisStateStore(OAuthStateStore):
    """One key per state, `<prefix>slack:oauth_state:<state>`, gone after STATE_TTL_S or
    its one use (GETDEL: two replicas cannot both accept it)."""

    def __init__(self, client: redis.Redis, prefix: str, ttl_s: int = STATE_TTL_S) -> None:
        self.client = client
        self.prefix = prefix + "slack:oauth_state:"
        self.ttl_s = ttl_s

    @property
    def logger(self) -> logging.Logger:
        return log

    def issue(self, *args: Any, **kwargs: Any) -> str:
        state = secrets.token_urlsafe(24)
        with redis_errors("keep an OAuth state"):
            self.client.set(self.prefix + state, "1", ex=self.ttl_s)
        return state

    def consume(self, state: str) -> bool:
        with redis_errors("check an OAuth state"):
            return self.client.getdel(self.prefix + state) is not None


class EmbeddedStateStore(OAuthStateStore):
    """The embedded store's oauth_states table."""

    def __init__(self, store: EmbeddedStore, ttl_s: int = STATE_TTL_S) -> None:
        self.store = store
        self.ttl_s = ttl_s

    @property
    def logger(self) -> logging.Logger:
        return log

    def issue(self, *args: Any, **kwargs: Any) -> str:
        state = secrets.token_urlsafe(24)
        self.store.put_oauth_state(state, time.time() + self.ttl_s)
        return state

    def consume(self, state: str) -> bool:
        return self.store.take_oauth_state(state, time.time())
