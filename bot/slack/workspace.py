"""Which workspace a piece of work is for, when citebot is installed in many.

Bolt's authorize finds the request's installation (bot/slack/installs.py) and puts its bot
token and ids in the request's context; `bind_workspace`, a global middleware, copies them
into a context variable of the request's thread. The worker pools run every piece of work
in a copy of the submitting thread's context (bot.slack.pool), so the listener and the
turn it hands on see the same workspace. Then:
- `TeamClient`, the one Web API client every part of the bot shares, calls Slack with that
  workspace's bot token (outside any request, with none);
- `TeamIdentity` answers with that workspace's bot user and bot ids;
- `TeamTurnLog` writes the owner of the install (the workspace, or the organisation of an
  org-wide install) into each turn record as `team`, so an uninstall can purge its turns.

With one SLACK_BOT_TOKEN none of this is used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from slack_bolt import BoltContext
from slack_sdk import WebClient

from bot.memory.turnlog import TurnLog
from bot.slack.inbound import Identity


@dataclass(frozen=True)
class Workspace:
    """The installation a request came through."""

    team: str  # the install's owner: the workspace id, or the organisation's for org-wide
    team_id: str | None
    enterprise_id: str | None
    bot_token: str | None
    bot_user_id: str | None
    bot_id: str | None


_current: ContextVar[Workspace | None] = ContextVar("citebot_workspace", default=None)


def current() -> Workspace | None:
    return _current.get()


def workspace_team_id() -> str | None:
    """The current request's workspace id (None outside one, or for an org-wide event)."""
    ws = _current.get()
    return ws.team_id if ws is not None else None


def workspace_of(context: BoltContext) -> Workspace:
    org_wide = bool(context.is_enterprise_install)
    team = (context.enterprise_id if org_wide else context.team_id) or ""
    return Workspace(
        team=team,
        team_id=context.team_id,
        enterprise_id=context.enterprise_id,
        bot_token=context.bot_token,
        bot_user_id=context.bot_user_id,
        bot_id=context.bot_id,
    )


def bind_workspace(context: BoltContext, next: Callable[[], Any]) -> Any:
    """Bolt global middleware: this request's workspace, for the work it starts."""
    _current.set(workspace_of(context) if context.authorize_result is not None else None)
    return next()


class bound:
    """`with bound(workspace):` runs a block as that workspace's (tests, the uninstall purge)."""

    def __init__(self, workspace: Workspace | None) -> None:
        self.workspace = workspace

    def __enter__(self) -> Workspace | None:
        self._token = _current.set(self.workspace)
        return self.workspace

    def __exit__(self, *_: object) -> None:
        _current.reset(self._token)


class TeamClient(WebClient):
    """A WebClient whose token is the current workspace's bot token."""

    @property
    def token(self) -> str | None:
        ws = _current.get()
        return ws.bot_token if ws is not None else self._fixed_token

    @token.setter
    def token(self, value: str | None) -> None:
        self._fixed_token = value


class TeamIdentity(Identity):
    """Who citebot is in the current workspace (each install has its own bot user)."""

    def __init__(self) -> None:  # nothing of its own: it reads the context
        pass

    @property
    def bot_user_id(self) -> str | None:
        ws = _current.get()
        return ws.bot_user_id if ws else None

    @property
    def bot_id(self) -> str | None:
        ws = _current.get()
        return ws.bot_id if ws else None

    @property
    def team_id(self) -> str | None:
        ws = _current.get()
        return ws.team_id if ws else None


class TeamTurnLog:
    """A turn log that records each turn's install owner as `team`."""

    def __init__(self, inner: TurnLog) -> None:
        self.inner = inner

    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        ws = _current.get()
        self.inner.put_turn(turn_id, created_at, {**record, "team": ws.team} if ws else record)

    def get_turn(self, turn_id: str) -> dict | None:
        record = self.inner.get_turn(turn_id)
        ws = _current.get()
        if record is not None and ws is not None and record.get("team") not in (None, ws.team):
            return None  # another workspace's turn: its buttons and `why` see nothing
        return record

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        self.inner.add_feedback(turn_id, at, user, value)

    def turns_since(self, since_iso: str) -> Iterator[dict]:
        return self.inner.turns_since(since_iso)

    def purge_turns(
        self, before: str | None, users: Sequence[str], limit: int | None = None, teams: Sequence[str] = ()
    ) -> list[dict]:
        return self.inner.purge_turns(before, users, limit, teams)
