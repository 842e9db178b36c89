"""Whether a person is a member of a channel, asked of Slack (conversations.members).

The agent DM answers under a viewed channel's scope only when the person may read that
channel (bot.slack.agent). Membership is the test: conversations.members lists a public
channel's members with `channels:read`, a private channel's with `groups:read` when
citebot is in it; a private channel citebot is not in is channel_not_found. Any failure,
and a channel with more members than MEMBERS_PAGES_MAX pages hold, counts as not a
member: it fails closed, and the DM's own scope answers.
"""

from __future__ import annotations

import threading
import time

import structlog
from slack_sdk import WebClient

from bot.slack.client import SLACK_ERRORS, slack_failed

log = structlog.get_logger("citebot.slack")

# Membership changes rarely within a minute, and a person asks a few questions a minute at
# most: one read per channel and person per minute (docs/decisions/0041-agent-surface.md).
MEMBERS_TTL_S = 60.0
# Slack's largest page for conversations.members is 1,000; five pages cover channels of up
# to 5,000 members and bound one check to five calls. Bigger channels fail closed.
MEMBERS_PAGE = 1000
MEMBERS_PAGES_MAX = 5


class Membership:
    def __init__(self, client: WebClient) -> None:
        self.client = client
        self._known: dict[tuple[str, str], tuple[bool, float]] = {}
        self._lock = threading.Lock()

    def is_member(self, channel: str, user: str) -> bool:
        now = time.monotonic()
        with self._lock:
            held = self._known.get((channel, user))
        if held and held[1] > now:
            return held[0]
        member = self._ask(channel, user)
        with self._lock:
            if len(self._known) > 10_000:
                self._known.clear()
            self._known[(channel, user)] = (member, now + MEMBERS_TTL_S)
        return member

    def _ask(self, channel: str, user: str) -> bool:
        cursor = None
        for _ in range(MEMBERS_PAGES_MAX):
            try:
                page = self.client.conversations_members(channel=channel, limit=MEMBERS_PAGE, cursor=cursor)
            except SLACK_ERRORS as exc:  # channel_not_found: private and citebot not in it
                log.info("slack_members_unknown", viewed=channel, error=slack_failed(exc))
                return False
            if user in (page.get("members") or []):
                return True
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return False
        log.info("slack_members_too_many", viewed=channel, pages=MEMBERS_PAGES_MAX)
        return False
