"""Installing citebot in many workspaces: Bolt's OAuth v2 flow, token rotation without a
race between replicas, and what an uninstall removes (docs/slack.md, "Installing in many
workspaces"; docs/decisions/0042-many-workspaces.md).

On when SLACK_CLIENT_ID and SLACK_CLIENT_SECRET are set. Bolt serves /slack/install (a page
with the "Add to Slack" link, carrying a one-use state) and /slack/oauth_redirect (the state
checked, oauth.v2.access, the installation saved) and authorizes every request from the
installation store (bot/slack/installs.py).

Token rotation: an installation whose bot token expires within ROTATE_BEFORE_MIN is
refreshed (oauth.v2.access, grant_type=refresh_token) when it is read, under a lock per
owner: a Redis lock when REDIS_URL is set, so two replicas never spend the same refresh
token, else a lock of this process. The second reader waits, reads the refreshed tokens and
refreshes nothing. Bolt's own rotation, which has no lock, is left a narrower window
(BOLT_ROTATE_BEFORE_MIN) it never reaches while this one works.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import structlog
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient
from slack_sdk.oauth.installation_store import Bot, Installation, InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore
from slack_sdk.oauth.token_rotation import TokenRotator

from bot.memory.redis import redis_errors
from bot.slack.installs import owner_key

if TYPE_CHECKING:
    import redis

log = structlog.get_logger("citebot.slack.oauth")

# Refresh a bot token this long before it expires. Slack's rotating tokens live 12 hours;
# Bolt's default margin is two hours, kept here (docs/decisions/0042-many-workspaces.md).
ROTATE_BEFORE_MIN = 120
# Bolt's own, lockless rotation: only for a token this close to expiry, which the locked
# rotation above has already refreshed unless Slack refused it (docs/decisions/0042-many-workspaces.md).
BOLT_ROTATE_BEFORE_MIN = 10
# The per-owner lock: held at most this long (a refresh is one Web API call, 15 s timeout,
# bot.slack.client.SLACK_TIMEOUT_S), waited for at most this long; a lock whose holder died
# expires on its own (docs/decisions/0042-many-workspaces.md).
LOCK_TIMEOUT_S = 30
LOCK_WAIT_S = 20

Lock = Callable[[str], AbstractContextManager[None]]


class ProcessLocks:
    """One lock per owner, in this process (the embedded store serves one process)."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @contextmanager
    def __call__(self, owner: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(owner, threading.Lock())
        if not lock.acquire(timeout=LOCK_WAIT_S):
            raise TimeoutError(f"another refresh of {owner}'s Slack token took over {LOCK_WAIT_S} s")
        try:
            yield
        finally:
            lock.release()


class RedisLocks:
    """One Redis lock per owner, `<prefix>slack:rotate:<owner>`: every replica takes it."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix + "slack:rotate:"

    @contextmanager
    def __call__(self, owner: str) -> Iterator[None]:
        lock = self.client.lock(self.prefix + owner, timeout=LOCK_TIMEOUT_S, blocking_timeout=LOCK_WAIT_S)
        with redis_errors("lock a Slack token refresh"):
            if not lock.acquire():
                raise TimeoutError(f"another replica's refresh of {owner}'s Slack token took over {LOCK_WAIT_S} s")
        try:
            yield
        finally:
            with redis_errors("release a Slack token refresh lock"):
                lock.release()


class RotatingInstallationStore(InstallationStore):
    """An installation store whose reads refresh a bot token near its expiry, once across
    every replica (the lock), and save the refreshed tokens before answering."""

    def __init__(self, inner: Any, rotator: TokenRotator, lock: Lock, before_min: int = ROTATE_BEFORE_MIN) -> None:
        self.inner = inner
        self.rotator = rotator
        self.lock = lock
        self.before_min = before_min

    @property
    def logger(self) -> Any:
        return self.inner.logger

    def save(self, installation: Installation) -> None:
        self.inner.save(installation)

    def save_bot(self, bot: Bot) -> None:
        self.inner.save_bot(bot)

    def find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        ids: dict[str, Any] = {
            "enterprise_id": enterprise_id,
            "team_id": team_id,
            "is_enterprise_install": is_enterprise_install,
        }
        bot = self.inner.find_bot(**ids)
        if bot is None or not self._due(bot.bot_token_expires_at):
            return bot
        with self.lock(owner_key(enterprise_id, team_id, is_enterprise_install)):
            bot = self.inner.find_bot(**ids)  # another replica may have refreshed it meanwhile
            if bot is None or not self._due(bot.bot_token_expires_at):
                return bot
            fresh = self.rotator.perform_bot_token_rotation(bot=bot, minutes_before_expiration=self.before_min)
            if fresh is not None:
                self.inner.save_bot(fresh)
                log.info("slack_token_refreshed", team=team_id, enterprise=enterprise_id)
            return fresh or bot

    def find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        ids: dict[str, Any] = {
            "enterprise_id": enterprise_id,
            "team_id": team_id,
            "user_id": user_id,
            "is_enterprise_install": is_enterprise_install,
        }
        found = self.inner.find_installation(**ids)
        if found is None or not self._due(found.bot_token_expires_at):
            return found
        with self.lock(owner_key(enterprise_id, team_id, is_enterprise_install)):
            found = self.inner.find_installation(**ids)
            if found is None or not self._due(found.bot_token_expires_at):
                return found
            fresh = self.rotator.perform_token_rotation(installation=found, minutes_before_expiration=self.before_min)
            if fresh is not None:
                self.inner.save(fresh)
                log.info("slack_token_refreshed", team=team_id, enterprise=enterprise_id)
            return fresh or found

    def delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        self.inner.delete_bot(enterprise_id=enterprise_id, team_id=team_id)

    def delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        self.inner.delete_installation(enterprise_id=enterprise_id, team_id=team_id, user_id=user_id)

    def delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        self.inner.delete_all(enterprise_id=enterprise_id, team_id=team_id)

    def owners(self) -> list[str]:
        return list(self.inner.owners())

    def _due(self, expires_at: int | None) -> bool:
        return expires_at is not None and expires_at - time.time() < self.before_min * 60


def oauth_settings(
    *,
    client_id: str,
    client_secret: str,
    scopes: str,
    installation_store: InstallationStore,
    state_store: OAuthStateStore,
) -> OAuthSettings:
    """Bolt's OAuth settings: its default paths, the stores, and Bolt's rotation margin."""
    return OAuthSettings(
        client_id=client_id,
        client_secret=client_secret,
        scopes=scopes.split(","),
        installation_store=installation_store,
        state_store=state_store,
        token_rotation_expiration_minutes=BOLT_ROTATE_BEFORE_MIN,
    )


def rotator(client: WebClient, client_id: str, client_secret: str) -> TokenRotator:
    """The SDK's token rotator, calling the Web API the bot's client calls (its base URL),
    without any workspace's token."""
    plain = WebClient(base_url=client.base_url, timeout=client.timeout)
    return TokenRotator(client_id=client_id, client_secret=client_secret, client=plain)
