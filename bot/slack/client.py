"""The Slack Web API client citebot uses, and who it is in the workspace."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic import SecretStr
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler, ServerErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.metrics import BACKEND_ERRORS
from bot.slack.inbound import Identity
from search.errors import ConfigError

# A Web API call gives up after this long. A call that times out is NOT retried: it raises
# after that one attempt (the SDK's connection handler retries refused and reset
# connections only), and the caller's fallback takes over (post fresh, say it ephemerally).
SLACK_TIMEOUT_S = 15
# Rate limits (429 with Retry-After) and server errors (500, 502, 503, 504) are retried,
# but all the waiting one turn does for Slack comes out of one allowance, so a turn worker
# is never held longer than this: past it, a call fails at once and the turn's fallback
# path still ends it visibly. Slack's Retry-After for chat.postMessage is usually 1-3 s;
# ten seconds covers a few of those and stays well under the 30 s a person waits
# before asking again.
SLACK_RETRY_BUDGET_S = 10.0
RATE_LIMIT_RETRIES = 3
SERVER_ERROR_RETRIES = 2
SERVER_ERROR_STATUSES = (500, 502, 503, 504)

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


class RetryBudget:
    """The seconds one turn may still spend waiting for Slack retries (thread-safe enough:
    one turn runs on one worker at a time)."""

    def __init__(self, seconds: float) -> None:
        self.left = seconds

    def take(self, seconds: float) -> bool:
        """Reserve a wait; False (and nothing taken) when the allowance cannot cover it."""
        if seconds > self.left:
            return False
        self.left -= seconds
        return True


_budget: ContextVar[RetryBudget | None] = ContextVar("citebot_slack_retry_budget", default=None)


@contextmanager
def retry_budget(seconds: float | None = None) -> Iterator[RetryBudget]:
    """All Slack retries inside share one allowance (a turn, a button click)."""
    budget = RetryBudget(SLACK_RETRY_BUDGET_S if seconds is None else seconds)
    token = _budget.set(budget)
    try:
        yield budget
    finally:
        _budget.reset(token)


def _take(seconds: float, why: str) -> bool:
    budget = _budget.get()
    if budget is None:  # outside any piece of work (start-up): one call's own allowance
        budget = RetryBudget(SLACK_RETRY_BUDGET_S)
    if budget.take(seconds):
        return True
    _log().warning("slack_retry_over_budget", reason=why, wait_s=round(seconds, 2), left_s=round(budget.left, 2))
    return False


def _log():
    import structlog

    return structlog.get_logger("citebot.slack")


def _retry_after(response: HttpResponse) -> float:
    for key, values in response.headers.items():
        if key.lower() == "retry-after" and values:
            try:
                return max(0.0, float(values[0]))
            except ValueError:
                break
    return 1.0


class BudgetedRateLimitRetryHandler(RateLimitErrorRetryHandler):
    """429: wait Retry-After (plus a little jitter) when the turn's allowance covers it."""

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code != 429:
            return False
        return _reserve(state, _retry_after(response) + random.uniform(0.0, 0.2), "rate_limited")

    def prepare_for_next_attempt(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        _wait_reserved(state)


class BudgetedServerErrorRetryHandler(ServerErrorRetryHandler):
    """5xx: back off (0.5 s, 1 s, …) when the turn's allowance covers it."""

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if response is None or response.status_code not in SERVER_ERROR_STATUSES:
            return False
        wait = self.interval_calculator.calculate_sleep_duration(state.current_attempt)
        return _reserve(state, wait, f"server_error_{response.status_code}")

    def prepare_for_next_attempt(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        _wait_reserved(state)


def _reserve(state: RetryState, wait: float, why: str) -> bool:
    """Take the wait from the allowance and note it on this request's retry state (the
    handlers are shared by every thread; the state is the request's own)."""
    if not _take(wait, why):
        return False
    state.custom_values = {**(state.custom_values or {}), "citebot_wait_s": wait}
    return True


def _wait_reserved(state: RetryState) -> None:
    state.next_attempt_requested = True
    time.sleep((state.custom_values or {}).get("citebot_wait_s", 0.5))
    state.increment_current_attempt()


def make_client(token: SecretStr | None, api_url: str | None = None) -> WebClient:
    """The Web API client: SLACK_BOT_TOKEN, and CITEBOT_SLACK_API_URL for a stand-in."""
    if token is None:
        raise ConfigError(
            "SLACK_BOT_TOKEN is not set: install the app to your workspace and copy the "
            "Bot User OAuth Token (xoxb-…) from its OAuth & Permissions page"
        )
    kwargs: dict[str, Any] = {"token": token.get_secret_value(), "timeout": SLACK_TIMEOUT_S}
    if api_url:
        kwargs["base_url"] = api_url.rstrip("/") + "/"
    client = WebClient(**kwargs)
    client.retry_handlers.append(BudgetedRateLimitRetryHandler(max_retry_count=RATE_LIMIT_RETRIES))
    client.retry_handlers.append(BudgetedServerErrorRetryHandler(max_retry_count=SERVER_ERROR_RETRIES))
    return client


def fetch_identity(client: WebClient) -> Identity:
    """auth.test: proves the token works and tells citebot its own user and bot ids."""
    try:
        r = client.auth_test()
    except SlackApiError as exc:
        raise ConfigError(
            f"Slack refused SLACK_BOT_TOKEN (auth.test: {slack_error(exc)}); copy the Bot User "
            "OAuth Token (xoxb-…) from the app's OAuth & Permissions page"
        ) from exc
    except SLACK_ERRORS as exc:
        raise ConfigError(
            f"cannot reach the Slack Web API at {client.base_url} ({slack_error(exc)}); "
            "check CITEBOT_SLACK_API_URL and the network"
        ) from exc
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
