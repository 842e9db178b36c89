"""Each workspace its own collection and scopes, when citebot is installed in many
(CITEBOT_STORE_TEMPLATE, CITEBOT_ES_INDEX_TEMPLATE, CITEBOT_SCOPES_TEMPLATE: `{team}` is the
workspace's id, or the organisation's for an org-wide install; docs/slack.md).

A question is answered by the answerer of the workspace it came from (bot.slack.workspace
tells which): its own store or Elasticsearch alias, opened on that workspace's first
question and kept; there is no path from one workspace's question to another's
collection, since nothing else is ever handed the store. The embedding model, glossary
and reranker are loaded once and shared. A workspace whose collection is empty or missing
gets the usual "the store is empty" failure on its turns, never another's answer.
`citebot ingest` (and every other command) works on one workspace's collection when
CITEBOT_TEAM names it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from bot.slack.scopes import ChannelPolicy, Scopes
from bot.slack.workspace import current
from search.errors import CitebotError, ConfigError, StoreError

if TYPE_CHECKING:
    from bot.answer.turn import Answerer


class NoWorkspace(ConfigError):
    """Work outside any workspace's request asked for a collection."""


class TeamCollections:
    """The answerer and scopes of each workspace, built on its first use."""

    def __init__(self, components: Any) -> None:
        """`components`: bot.wiring.Components, which builds this (not imported: no cycle)."""
        self.components = components
        self._teams: dict[str, Any] = {}
        self._answerers: dict[str, Answerer] = {}
        self._lock = threading.Lock()

    def team(self) -> str:
        ws = current()
        if ws is None or not ws.team:
            raise NoWorkspace(
                "no workspace: a collection is chosen by the workspace a request "
                "comes from (the model is loaded; collections open on first use)"
            )
        return ws.team

    def components_of(self, team: str) -> Any:
        with self._lock:
            found = self._teams.get(team)
            if found is None:
                shared = self.components
                found = type(shared)(shared.settings.for_team(team))
                for name in ("embedder", "glossary", "reranker"):  # one model for every workspace
                    setattr(found, name, getattr(shared, name))
                self._teams[team] = found
            return found

    def answerer(self) -> Answerer:
        """The current workspace's answerer (bot.slack.turns calls it for each turn)."""
        try:
            team = self.team()
        except NoWorkspace:
            self.components.embedder  # noqa: B018 - warm-up: load the model all share
            raise
        with self._lock:
            found = self._answerers.get(team)
        if found is not None:
            return found
        mine = self.components_of(team)
        if mine.settings.store_template and not mine.settings.es_url and not mine.settings.store.is_dir():
            raise StoreError(
                f"the store is empty: workspace {team} has no collection yet; run "
                f"`CITEBOT_TEAM={team} citebot ingest PATH` first"
            )
        built = mine.make_answerer(mine.retriever(), self.components.turnlog, self.components.state)
        with self._lock:
            return self._answerers.setdefault(team, built)

    def scopes(self) -> Scopes:
        if not self.components.settings.scopes_template:
            return self.components.scopes
        return self.components_of(self.team()).scopes

    def readiness(self) -> dict[str, str]:
        """/readyz: the model loaded, Redis answering; each workspace's store opens with its
        first question, so none is checked here."""
        checks = {"model": "ok" if "embedder" in self.components.__dict__ else "loading"}
        try:
            if self.components.redis is not None:
                from bot.memory.redis import redis_errors

                with redis_errors("answer a ping"):
                    self.components.redis.ping()
                checks["redis"] = "ok"
        except CitebotError as exc:
            checks["redis"] = str(exc)
        return checks


class TeamScopes(Scopes):
    """The scopes of the current workspace (CITEBOT_SCOPES_TEMPLATE's file for it)."""

    def __init__(self, collections: TeamCollections) -> None:  # a view, not a table of its own
        object.__setattr__(self, "collections", collections)
        object.__setattr__(self, "default", Scopes.everything().default)
        object.__setattr__(self, "channels", {})
        object.__setattr__(self, "users", {})
        object.__setattr__(self, "path", None)

    def _now(self) -> Scopes:
        return self.collections.scopes()  # type: ignore[attr-defined]

    def for_channel(self, channel: str, user: str | None = None, *, own_dm: bool = False) -> ChannelPolicy:
        return self._now().for_channel(channel, user, own_dm=own_dm)

    def user_table_may_apply(self, channel: str, user: str | None) -> bool:
        return self._now().user_table_may_apply(channel, user)

    def describe(self) -> str:
        return f"one scopes file per workspace: {self.collections.components.settings.scopes_template}"  # type: ignore[attr-defined]
