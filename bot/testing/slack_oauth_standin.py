"""The Web API stand-in with many workspaces: OAuth v2 installs, a bot token per workspace,
and token rotation, for tests of bot/slack/many.py.

`ManyWorkspacesStandIn` is a SlackStandIn (bot/testing/slack_standin.py) that also answers
- oauth.v2.access with a code (the person allowed the install: `consent(team)` makes one)
  or with grant_type=refresh_token (rotation), each checking the app's client id and
  secret (HTTP Basic, as the SDK sends them); a refresh token works once, as Slack's do,
  so two replicas that both spend one are caught (`refresh_refused` counts them);
- auth.test for each workspace's token, with that workspace's ids;
- every other method with any live workspace token (expired and revoked ones get
  `token_expired` and `invalid_auth`), recording which workspace called (`team_calls`).
"""

from __future__ import annotations

import base64
import itertools
import threading
import time
from dataclasses import dataclass
from typing import Any

from bot.testing.slack_standin import APP_ID, SlackStandIn

CLIENT_ID = "1111.2222"
CLIENT_SECRET = "standin-client-secret"
# What Slack gives a rotating bot token: twelve hours.
TOKEN_LIFE_S = 12 * 3600


@dataclass(frozen=True)
class Team:
    id: str
    enterprise_id: str | None = None
    org_wide: bool = False  # an org-wide install (Enterprise Grid): the id is the enterprise's

    @property
    def bot_user_id(self) -> str:
        return "UBOT" + self.id

    @property
    def bot_id(self) -> str:
        return "BBOT" + self.id


class ManyWorkspacesStandIn(SlackStandIn):
    """Slack's Web API for an app installed in many workspaces."""

    def __init__(self, *, rotating: bool = False, token_life_s: int = TOKEN_LIFE_S) -> None:
        super().__init__(token="xoxb-unused-single-workspace-token")
        self.rotating = rotating
        self.token_life_s = token_life_s
        self._serial = itertools.count(1)
        self._guard = threading.Lock()
        self._codes: dict[str, Team] = {}
        self._tokens: dict[str, tuple[Team, float | None]] = {}  # token -> team, expiry
        self._refresh: dict[str, Team] = {}
        self.revoked: set[str] = set()
        self.team_calls: list[tuple[str, str]] = []  # (method, team id)
        self.refresh_refused = 0
        self.refreshes = 0

    def consent(self, team: Team) -> str:
        """A person allowed the install in `team`: the code Slack sends to the redirect."""
        code = f"code-{team.id}-{next(self._serial)}"
        with self._guard:
            self._codes[code] = team
        return code

    def tokens_of(self, team_id: str) -> list[str]:
        with self._guard:
            return [t for t, (team, _) in self._tokens.items() if team.id == team_id]

    def _issue(self, team: Team) -> dict[str, Any]:
        n = next(self._serial)
        token = f"xoxb-{team.id}-{n}"
        answer: dict[str, Any] = {"access_token": token, "token_type": "bot"}
        expiry = None
        if self.rotating:
            expiry = time.time() + self.token_life_s
            answer |= {"refresh_token": f"xoxe-1-{team.id}-{n}", "expires_in": self.token_life_s}
            self._refresh[answer["refresh_token"]] = team
        self._tokens[token] = (team, expiry)
        return answer

    def _answer_for(self, method: str, p: dict[str, Any], token: str | None, auth: str) -> dict[str, Any]:
        if method == "oauth.v2.access":
            return self._oauth(p, auth)
        with self._guard:
            held = self._tokens.get(token or "")
        if held is None or token in self.revoked:
            return {"ok": False, "error": "invalid_auth"}
        team, expiry = held
        if expiry is not None and expiry < time.time():
            return {"ok": False, "error": "token_expired"}
        with self._guard:
            self.team_calls.append((method, team.id))
        if method == "auth.test":
            return {
                "ok": True,
                "url": f"https://{team.id.lower()}.slack.com/",
                "team": team.id,
                "user": "citebot",
                "team_id": None if team.org_wide else team.id,
                "user_id": team.bot_user_id,
                "bot_id": team.bot_id,
                "enterprise_id": team.enterprise_id,
                "is_enterprise_install": team.org_wide,
            }
        return self._answer(method, p)

    def _oauth(self, p: dict[str, Any], auth: str) -> dict[str, Any]:
        expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if auth != expected:
            return {"ok": False, "error": "invalid_client"}
        with self._guard:
            if p.get("grant_type") == "refresh_token":
                team = self._refresh.pop(str(p.get("refresh_token")), None)
                if team is None:
                    self.refresh_refused += 1
                    return {"ok": False, "error": "invalid_refresh_token"}
                self.refreshes += 1
            else:
                team = self._codes.pop(str(p.get("code")), None)
                if team is None:
                    return {"ok": False, "error": "invalid_code"}
            answer = self._issue(team)
        workspace = None if team.org_wide else {"id": team.id, "name": f"Team {team.id}"}
        enterprise = {"id": team.enterprise_id, "name": "Org"} if team.enterprise_id else None
        return {
            "ok": True,
            **answer,
            "scope": p.get("scope", "chat:write"),
            "app_id": APP_ID,
            "bot_user_id": team.bot_user_id,
            "team": workspace,
            "enterprise": enterprise,
            "is_enterprise_install": team.org_wide,
            "authed_user": {"id": "UINSTALLER"},
        }


def envelope(team: Team, event: dict, event_id: str) -> dict[str, Any]:
    """An Events API body from `team`, as Slack sends it to an app installed in many."""
    return {
        "token": "legacy-verification-token",
        "team_id": team.id,
        "api_app_id": APP_ID,
        "enterprise_id": team.enterprise_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "is_ext_shared_channel": False,
        "authorizations": [
            {
                "team_id": None if team.org_wide else team.id,
                "user_id": team.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": team.org_wide,
                "enterprise_id": team.enterprise_id,
            }
        ],
    }
