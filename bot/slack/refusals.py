"""Slack methods a workspace refuses, remembered so each refusal is logged once.

The agent surface's calls (assistant.threads.setTitle, setSuggestedPrompts, setStatus for
a stage, task chunks in a stream) are extras: a workspace on the older surface, an app
without `assistant:write`, or a Slack that does not know a method answers `not_allowed`,
`missing_scope` or `unknown_method`. The answer arrives anyway; the refusal is logged once
per method and error, and the method is not tried again for REFUSAL_RETRY_S (an admin
may add the scope meanwhile). Any other failure is logged each time it happens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError

from bot.slack.client import SLACK_ERRORS, slack_error, slack_failed

log = structlog.get_logger("citebot.slack")

# What Slack answers when a workspace or app cannot use a method (or a chunk type):
# the answer goes on without it. invalid_chunks: a Slack that does not take task chunks.
REFUSED = ("not_allowed", "missing_scope", "unknown_method", "not_allowed_token_type", "invalid_chunks")
# A refused method is tried again after ten minutes: long enough that a workspace without
# the scope costs one failed call per replica per ten minutes, short enough that adding
# the scope takes effect without a restart (docs/decisions/0041-agent-surface.md).
REFUSAL_RETRY_S = 600.0


class Refusals:
    """Which extras Slack refused lately (thread-safe; one per bot process)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._until: dict[str, float] = {}
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def allowed(self, what: str) -> bool:
        with self._lock:
            until = self._until.get(what)
        return until is None or until <= self.clock()

    def refuse(self, what: str, error: str) -> None:
        """Slack refused `what` with `error`: skip it for a while; log it the first time."""
        with self._lock:
            self._until[what] = self.clock() + REFUSAL_RETRY_S
            first = (what, error) not in self._logged
            self._logged.add((what, error))
        if first:
            log.warning("slack_method_refused", method=what, error=error, retry_after_s=REFUSAL_RETRY_S)

    def call(self, what: str, call: Callable[[], Any]) -> bool:
        """Make the call unless `what` was refused lately; True when Slack took it."""
        if not self.allowed(what):
            return False
        try:
            call()
            return True
        except SlackApiError as exc:
            error = slack_error(exc)
            if error in REFUSED:
                self.refuse(what, error)
            else:
                log.warning("slack_call_failed", method=what, error=slack_failed(exc))
        except SLACK_ERRORS as exc:
            log.warning("slack_call_failed", method=what, error=slack_failed(exc))
        return False
