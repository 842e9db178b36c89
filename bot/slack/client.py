"""The Slack Web API client citebot uses, and who it is in the workspace."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import SecretStr
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from bot.metrics import BACKEND_ERRORS
from bot.slack.inbound import Identity
from search.errors import ConfigError

# A Web API call gives up after this long. A call that times out raises after that one
# attempt: the SDK's default handler retries only failed connections, ours adds 429s.
SLACK_TIMEOUT_S = 15

SLACK_ERRORS = (SlackClientError, OSError)  # API errors, and the network under the SDK


def slack_error(exc: BaseException) -> str:
    """A Slack failure in a few words: the API's error code, else the exception."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or exc.response.status_code)
    return f"{type(exc).__name__}: {exc}"


def slack_failed(exc: BaseException) -> str:
    """A Slack call failed during work: counted as a Slack backend error, described."""
    BACKEND_ERRORS.labels("slack").inc()
    return slack_error(exc)


def make_client(token: SecretStr | None, api_url: str | None = None) -> WebClient:
    """The Web API client: SLACK_BOT_TOKEN, and CITEBOT_SLACK_API_URL for a stand-in."""
    if token is None:
        raise ConfigError(
            "SLACK_BOT_TOKEN is not set: install the app to your workspace and copy the "
            "Bot User OAuth Token (xoxb-…) from its OAuth & Permissions page")
    kwargs: dict[str, Any] = {"token": token.get_secret_value(), "timeout": SLACK_TIMEOUT_S}
    if api_url:
        kwargs["base_url"] = api_url.rstrip("/") + "/"
    client = WebClient(**kwargs)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
    return client


def fetch_identity(client: WebClient) -> Identity:
    """auth.test: proves the token works and tells citebot its own user and bot ids."""
    try:
        r = client.auth_test()
    except SlackApiError as exc:
        raise ConfigError(
            f"Slack refused SLACK_BOT_TOKEN (auth.test: {slack_error(exc)}); copy the Bot User "
            "OAuth Token (xoxb-…) from the app's OAuth & Permissions page") from exc
    except SLACK_ERRORS as exc:
        raise ConfigError(
            f"cannot reach the Slack Web API at {client.base_url} ({slack_error(exc)}); "
            "check CITEBOT_SLACK_API_URL and the network") from exc
    return Identity(bot_user_id=r.get("user_id"), bot_id=r.get("bot_id"), team_id=r.get("team_id"))


class _ClientGivenOnPurpose(logging.Filter):
    """Drops Bolt's start-up warning that SLACK_BOT_TOKEN in the environment goes unused:
    citebot always hands Bolt its own client (for CITEBOT_SLACK_API_URL), built from it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def bolt_logger() -> logging.Logger:
    logger = logging.getLogger("citebot.bolt")
    if not any(isinstance(f, _ClientGivenOnPurpose) for f in logger.filters):
        logger.addFilter(_ClientGivenOnPurpose())
    return logger
