"""Per-channel scopes: which sources a channel's questions are answered from, and how.

CITEBOT_SCOPES names a TOML file (read with the standard library's tomllib):

    [default]                       # every channel and DM without a table of its own
    sources = ["**"]                # globs over source paths as citations show them
    reply = "thread"                # thread | ephemeral | off

    [channels.C0123ENG]
    sources = ["engineering/**", "company/**"]
    reply = "thread"

    [channels.C0456PEOPLE]
    sources = ["people/**"]
    reply = "ephemeral"             # only the asker sees the answer (with a Share button)

    [channels.C0789PARTNER]         # a Slack Connect channel: refused unless shared = true
    sources = ["public/**"]
    shared = true

    [users.U0123ALICE]              # her own DM with citebot (DMs use [default] otherwise)
    sources = ["**"]

A channel table without `sources` keeps the default's sources; without `reply`, the
default's reply. The scope is access control: the stores apply it inside the search (see
search/scope.py). A file that cannot be used stops citebot at start with the line and
the fix; nothing is guessed.

Whose conversation it is. A `[users]` table covers only that person's own DM with citebot,
because everyone in a conversation reads what citebot posts there (an answer shared, a
follow-up in a thread). A D… channel is that DM when Slack says so: a `message.im` event
(Slack sends citebot those only from its own DMs, with the person as sender), the Home
tab's event, or, for `/ask` and the message shortcut (whose payloads do not say),
conversations.info answering `is_im` with that person as the other member (needs
`im:read`; the bot token cannot see other people's DMs, so a DM between two people is
channel_not_found). Anything else, an error included, is not their DM: a DM or group DM
with other people, like a channel, is answered under its channel table, else [default].
Share posts an answer only where the conversation's scope covers every source the answer
was written from (`uncovered`).
"""

from __future__ import annotations

import re
import time
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from slack_sdk import WebClient

from bot.slack.client import SLACK_ERRORS, slack_failed
from search.config import read_setting_file
from search.errors import ConfigError
from search.scope import Scope

log = structlog.get_logger("citebot.slack")

REPLY_MODES = ("thread", "ephemeral", "off")
# How long a channel's "shared with another organisation" flag (conversations.info) is
# trusted for slash commands; events carry the flag themselves.
SHARED_FLAG_TTL_S = 600
NOT_SHARED_NOTICE = (
    "🔒 This channel is shared with another organisation, and citebot does not answer in "
    "shared channels unless an admin allows it (`shared = true` in this channel's table of "
    "the scopes file). Ask me in a channel of your own workspace or in a DM."
)
OFF_NOTICE = (
    "🔕 citebot does not answer in this channel (its reply mode is `off` in the scopes file). "
    "Ask me in a DM, or in a channel where I answer."
)
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{2,}$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_KEYS = {"default": {"sources", "reply"}, "channels": {"sources", "reply", "shared", "name"}, "users": {"sources"}}


@dataclass(frozen=True)
class ChannelPolicy:
    """What citebot does with a question in one channel (or DM)."""

    scope: Scope
    reply: str = "thread"
    shared: bool = False  # may answer in a channel shared with another organisation


@dataclass(frozen=True)
class Scopes:
    """The scopes file, resolved: a policy for every channel, DM and user."""

    default: ChannelPolicy
    channels: dict[str, ChannelPolicy] = field(default_factory=dict)
    users: dict[str, Scope] = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def everything(cls) -> Scopes:
        """No scopes file: every channel answered from the whole collection, in threads."""
        return cls(ChannelPolicy(Scope(("**",), "default")))

    def for_channel(self, channel: str, user: str | None = None, *, own_dm: bool = False) -> ChannelPolicy:
        """The policy of a conversation: its channel table; else, in the person's own DM
        with citebot (`own_dm`, see the module's docstring), their [users] table; else the
        default. A DM or group DM with other people never gets one person's table."""
        if channel in self.channels:
            return self.channels[channel]
        if own_dm and channel.startswith("D") and user and user in self.users:
            return ChannelPolicy(self.users[user], self.default.reply)
        return self.default

    def user_table_may_apply(self, channel: str, user: str | None) -> bool:
        """Whether the answer depends on this D… channel being the person's DM with citebot
        (only then is it worth asking Slack)."""
        return channel.startswith("D") and channel not in self.channels and bool(user) and user in self.users

    def describe(self) -> str:
        return (
            f"{self.path or 'no scopes file'}: default {self.default.scope.describe()}, "
            f"{len(self.channels)} channel table(s), {len(self.users)} user table(s)"
        )


def uncovered(scope: Scope, sources: Iterable[str | None]) -> list[str]:
    """The sources a scope does not allow, in order, without repeats (empty: all covered)."""
    return [s for s in dict.fromkeys(x for x in sources if x) if not scope.allows(s)]


def not_here(policy: ChannelPolicy, shared: bool) -> str | None:
    """Why citebot does not answer in this channel (a notice for the asker), or None."""
    if shared and not policy.shared:
        return NOT_SHARED_NOTICE
    if policy.reply == "off":
        return OFF_NOTICE
    return None


class Admission:
    """Whether a channel is shared with another organisation, and whether a D… channel is a
    person's own DM with citebot, for slash commands and shortcuts (whose payloads do not
    say): conversations.info, cached. Both fail closed (unknown: shared; not their DM)."""

    def __init__(self, client: WebClient, scopes: Scopes | None = None) -> None:
        self.client = client
        self.scopes = scopes or Scopes.everything()
        self._flags: dict[str, tuple[bool, float]] = {}
        self._dms: dict[str, tuple[str, float]] = {}  # D… channel -> (citebot's im with, until)

    def shared(self, channel: str) -> bool:
        if not channel or channel.startswith("D"):
            return False
        now = time.monotonic()
        cached = self._flags.get(channel)
        if cached and cached[1] > now:
            return cached[0]
        try:
            info = self.client.conversations_info(channel=channel).get("channel") or {}
        except SLACK_ERRORS as exc:
            log.warning("slack_channel_info_failed", error=slack_failed(exc))
            return True
        flag = bool(info.get("is_ext_shared") or info.get("is_pending_ext_shared"))
        self._flags[channel] = (flag, now + SHARED_FLAG_TTL_S)
        return flag

    def policy(self, channel: str, user: str | None, *, own_dm: bool = False) -> ChannelPolicy:
        """The conversation's policy: a person's [users] table only in their own DM with
        citebot (`own_dm` when Slack's event says so, else asked here)."""
        if not own_dm and self.scopes.user_table_may_apply(channel, user):
            own_dm = self.own_dm(channel, user)
        return self.scopes.for_channel(channel, user, own_dm=own_dm)

    def own_dm(self, channel: str, user: str | None) -> bool:
        """Whether a D… channel is this person's DM with citebot (conversations.info: an im
        whose other member is the person), cached. Unknown counts as not: fails closed."""
        if not channel.startswith("D") or not user:
            return False
        now = time.monotonic()
        cached = self._dms.get(channel)
        if cached and cached[1] > now:
            return cached[0] == user
        try:
            info = self.client.conversations_info(channel=channel).get("channel") or {}
        except SLACK_ERRORS as exc:  # channel_not_found: a DM citebot is not in
            log.info("slack_dm_not_citebots", error=slack_failed(exc))
            return False
        member = str(info.get("user") or "") if info.get("is_im") else ""
        self._dms[channel] = (member, now + SHARED_FLAG_TTL_S)
        return member == user


class _Lines:
    """Where a table or key sits in the file, for error messages (tomllib gives no positions)."""

    # No two adjacent parts can match the same characters, so a long line costs linear time
    # (a lazy group between optional spaces backtracked cubically on "[" and spaces).
    _HEADER = re.compile(r"^\s*\[([^\]]*)\]\s*(?:#.*)?$")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def _header_names(self, raw: str) -> str:
        return ".".join(p.strip().strip("\"'") for p in raw.split("."))

    def of(self, table: str, key: str | None = None) -> int | None:
        current = None
        for n, line in enumerate(self.lines, 1):
            m = self._HEADER.match(line)
            if m:
                current = self._header_names(m.group(1).strip())
                if key is None and current == table:
                    return n
                continue
            if key is not None and current == table and re.match(rf"^\s*{re.escape(key)}\s*=", line):
                return n
        return None


def load_scopes(path: Path) -> Scopes:
    """Read and check the scopes file; any problem is a ConfigError naming the line."""
    path = Path(path)
    text = read_setting_file(path, "CITEBOT_SCOPES", "the scopes TOML file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"bad setting: CITEBOT_SCOPES: {path} is not valid TOML: {exc}; "
            "fix that line (strings need quotes, tables look like [channels.C0123])"
        ) from exc
    except RecursionError:  # tomllib recurses once per nested [ or {
        raise ConfigError(
            f"bad setting: CITEBOT_SCOPES: {path} nests arrays or inline tables "
            "too deeply to read; fix: write sources as one flat list of globs"
        ) from None
    return _Parser(path, _Lines(text)).parse(data)


class _Parser:
    def __init__(self, path: Path, lines: _Lines) -> None:
        self.path = path
        self.lines = lines

    def fail(self, table: str, key: str | None, problem: str, fix: str) -> ConfigError:
        line = self.lines.of(table, key) or self.lines.of(table)
        where = f"{self.path} line {line}" if line else str(self.path)
        return ConfigError(f"bad setting: CITEBOT_SCOPES: {where} ([{table}]): {problem}; fix: {fix}")

    def parse(self, data: dict[str, Any]) -> Scopes:
        for top in data:
            if top not in _KEYS:
                raise self.fail(
                    top,
                    None,
                    f"unknown table [{top}]",
                    "use only [default], [channels.<channel id>] and [users.<user id>]",
                )
        if not isinstance(data.get("default"), dict) or "sources" not in data["default"]:
            raise ConfigError(
                f"bad setting: CITEBOT_SCOPES: {self.path} has no [default] table with sources; "
                'fix: add a line [default] and below it sources = ["**"] (or the globs every '
                "channel without a table of its own may read)"
            )
        default_table = data["default"]
        self.check_keys("default", default_table)
        default = ChannelPolicy(self.sources("default", default_table), self.reply("default", default_table, "thread"))
        channels: dict[str, ChannelPolicy] = {}
        for channel, table in self.tables(data, "channels").items():
            name = f"channels.{channel}"
            if not _CHANNEL_ID.match(channel):
                raise self.fail(
                    name,
                    None,
                    f"{channel!r} is not a channel ID",
                    "name channels by ID (C…, G… or D…), not by #name: the ID is at the "
                    "bottom of the channel's details in Slack",
                )
            self.check_keys(name, table)
            scope = self.sources(name, table) if "sources" in table else Scope(default.scope.globs, name)
            shared = table.get("shared", False)
            if not isinstance(shared, bool):
                raise self.fail(
                    name,
                    "shared",
                    f"shared = {shared!r} is not true or false",
                    "shared = true (answer in this Slack Connect channel) or leave it out",
                )
            channels[channel] = ChannelPolicy(scope, self.reply(name, table, default.reply), shared)
        users: dict[str, Scope] = {}
        for user, table in self.tables(data, "users").items():
            name = f"users.{user}"
            if not _USER_ID.match(user):
                raise self.fail(
                    name,
                    None,
                    f"{user!r} is not a user ID",
                    "name users by member ID (U… or W…): Slack shows it under the profile's ⋮ menu, Copy member ID",
                )
            self.check_keys(name, table)
            if "sources" not in table:
                raise self.fail(
                    name, None, "a user table needs sources", 'sources = ["…"] (the globs this person\'s DMs may read)'
                )
            users[user] = self.sources(name, table)
        return Scopes(default, channels, users, self.path)

    def tables(self, data: dict[str, Any], top: str) -> dict[str, dict[str, Any]]:
        found = data.get(top, {})
        if not isinstance(found, dict):
            raise self.fail(top, None, f"{top} must hold tables", f"write [{top}.<id>] headers")
        for key, table in found.items():
            if not isinstance(table, dict):
                raise self.fail(
                    top,
                    key,
                    f"{top}.{key} is a value, not a table",
                    f"write it as a table: [{top}.{key}] with sources = [...] below",
                )
        return found

    def check_keys(self, name: str, table: dict[str, Any]) -> None:
        allowed = _KEYS[name.split(".")[0]]
        for key in table:
            if key not in allowed:
                raise self.fail(
                    name, key, f"unknown key {key!r}", f"use only {', '.join(sorted(allowed))} in this table"
                )

    def sources(self, name: str, table: dict[str, Any]) -> Scope:
        globs = table["sources"]
        if isinstance(globs, str):
            raise self.fail(
                name, "sources", "sources is a string, not a list", f"sources = [{globs!r}]".replace("'", '"')
            )
        if not isinstance(globs, list) or not all(isinstance(g, str) and g.strip() for g in globs):
            raise self.fail(
                name,
                "sources",
                "sources must be a list of non-empty glob strings",
                'sources = ["engineering/**", "company/**"] (or [] for nothing)',
            )
        for g in globs:
            if g.startswith("/") or "\\" in g:
                raise self.fail(
                    name,
                    "sources",
                    f"{g!r} is not a source path as citations show it",
                    'write globs over the paths citations show, with / and no leading /, e.g. "engineering/**"',
                )
        return Scope(tuple(globs), name)

    def reply(self, name: str, table: dict[str, Any], default: str) -> str:
        reply = table.get("reply", default)
        if reply not in REPLY_MODES:
            raise self.fail(
                name,
                "reply",
                f"reply = {reply!r} is not one of {', '.join(REPLY_MODES)}",
                'reply = "thread" (answer in the thread), "ephemeral" (only the asker '
                'sees it) or "off" (citebot does not answer here)',
            )
        return reply
