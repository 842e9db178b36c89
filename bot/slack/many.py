"""citebot in many workspaces: the pieces bot.wiring puts together when SLACK_CLIENT_ID and
SLACK_CLIENT_SECRET are set, and what an uninstall removes.

`app_uninstalled`, and `tokens_revoked` for the bot's token, delete the workspace's (or the
organisation's) installation and purge its turns, their feedback and the state of the
threads they were asked in (bot.memory.retention.purge, by the `team` each turn records:
bot.slack.workspace.TeamTurnLog). A revoked person's token deletes only that person's
installation. Slack sends both events without a token to check them with; the request's
signature is what proves them Slack's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from slack_bolt import Ack, App, BoltContext
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient

from bot.memory.retention import purge
from bot.slack.client import (
    RATE_LIMIT_RETRIES,
    SERVER_ERROR_RETRIES,
    SLACK_TIMEOUT_S,
    BudgetedRateLimitRetryHandler,
    BudgetedServerErrorRetryHandler,
)
from bot.slack.installs import EmbeddedRows, EmbeddedStateStore, RedisRows, RedisStateStore, RowsInstallationStore
from bot.slack.oauth import ProcessLocks, RedisLocks, RotatingInstallationStore, oauth_settings, rotator
from bot.slack.workspace import TeamClient, TeamIdentity, TeamTurnLog, bind_workspace, workspace_of

if TYPE_CHECKING:
    from bot.memory.state import ConversationState
    from bot.memory.turnlog import TurnLog

log = structlog.get_logger("citebot.slack")


@dataclass
class ManyWorkspaces:
    """What SlackBot is built with in many-workspace mode, and what is attached after."""

    client: WebClient
    identity: TeamIdentity
    turnlog: TeamTurnLog
    installations: RotatingInstallationStore
    settings: OAuthSettings

    def attach(self, app: App, state: ConversationState) -> None:
        """The workspace middleware and the uninstall listeners, on the built Bolt app."""
        app.use(bind_workspace)
        forget = Uninstalls(self.installations, self.turnlog, state)
        app.event("app_uninstalled")(ack=_ack, lazy=[forget.on_uninstalled])
        app.event("tokens_revoked")(ack=_ack, lazy=[forget.on_tokens_revoked])


def many_workspaces(components: Any, client: WebClient | None = None) -> ManyWorkspaces:
    """The client, identity, turn log, stores and OAuth settings for many workspaces: Redis
    when REDIS_URL is set, else the embedded store (beside an Elasticsearch collection too).
    `components` is bot.wiring.Components (not imported: wiring sits above bot.slack)."""
    from search.embedded import EmbeddedStore

    s = components.settings
    assert s.slack_client_id is not None and s.slack_client_secret is not None  # oauth_enabled()
    secret = s.slack_client_secret.get_secret_value()
    if client is None:
        client = TeamClient(
            base_url=(s.slack_api_url or "https://slack.com/api/").rstrip("/") + "/", timeout=SLACK_TIMEOUT_S
        )
        client.retry_handlers.append(BudgetedRateLimitRetryHandler(max_retry_count=RATE_LIMIT_RETRIES))
        client.retry_handlers.append(BudgetedServerErrorRetryHandler(max_retry_count=SERVER_ERROR_RETRIES))
    redis = components.redis
    if redis is not None:
        rows: Any = RedisRows(redis, components.prefix)
        states: Any = RedisStateStore(redis, components.prefix)
        locks: Any = RedisLocks(redis, components.prefix)
    else:
        store = components.store if isinstance(components.store, EmbeddedStore) else EmbeddedStore(s.store)
        rows, states, locks = EmbeddedRows(store), EmbeddedStateStore(store), ProcessLocks()
    installations = RotatingInstallationStore(
        RowsInstallationStore(rows), rotator(client, s.slack_client_id, secret), locks
    )
    settings = oauth_settings(
        client_id=s.slack_client_id,
        client_secret=secret,
        scopes=s.slack_scopes,
        installation_store=installations,
        state_store=states,
    )
    turnlog = TeamTurnLog(components.turnlog)
    components.turnlog = turnlog  # the answerer records each turn's team
    return ManyWorkspaces(
        client=client, identity=TeamIdentity(), turnlog=turnlog, installations=installations, settings=settings
    )


class Uninstalls:
    """Forget a workspace that removed citebot, or the person who revoked their token."""

    def __init__(self, installations: Any, turnlog: TurnLog, state: ConversationState) -> None:
        self.installations = installations
        self.turnlog = turnlog
        self.state = state

    def on_uninstalled(self, context: BoltContext) -> None:
        self.forget(context, "app_uninstalled")

    def on_tokens_revoked(self, context: BoltContext, event: dict) -> None:
        tokens = event.get("tokens") or {}
        if tokens.get("bot"):
            self.forget(context, "tokens_revoked")
            return
        for user in tokens.get("oauth") or []:
            self.installations.delete_installation(
                enterprise_id=context.enterprise_id, team_id=_team(context), user_id=user
            )
        log.info("slack_tokens_revoked", people=len(tokens.get("oauth") or []))

    def forget(self, context: BoltContext, why: str) -> None:
        ws = workspace_of(context)
        self.installations.delete_all(enterprise_id=context.enterprise_id, team_id=_team(context))
        purged = purge(self.turnlog, self.state, None, (), teams=[ws.team]) if ws.team else None
        log.info("slack_workspace_forgotten", reason=why, team=ws.team, **(purged.as_dict() if purged else {}))


def _team(context: BoltContext) -> str | None:
    return None if context.is_enterprise_install else context.team_id


def _ack(ack: Ack) -> None:
    ack()
