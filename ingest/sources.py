"""Named sources (CITEBOT_SOURCES): where a team keeps its documents, read by `citebot sync`.

    [sources.handbook]            # stored as handbook/<path>
    git = "https://git.example.com/org/handbook.git"   # a URL or a local path
    branch = "main"               # optional; the remote's default otherwise
    path = "content"              # optional sub-folder
    token_env = "HANDBOOK_TOKEN"  # optional: the variable holding an https token
    link = "https://git.example.com/org/handbook/src/{commit}/{path}"  # optional
    [sources.runbooks]
    folder = "/srv/runbooks"
    [sources.eng-wiki]
    archive = "/exports/confluence-ENG.zip"

Every document of a source is stored under the source's name (`runbooks/pager/rotation.md`),
so one store holds several sources without clashing names and a scope's `runbooks/**`
glob reads one source. A file that cannot be used stops citebot at start with its line and
the fix (`bad setting: CITEBOT_SOURCES: ...`), as the scopes file does. A token is never
written in the file: `token_env` names the environment variable that holds it (bot/ reads
it; ingest/git.py hands it to git for one command only).

A source is one kind (this module's KINDS); a live connector (Confluence, Notion, Drive)
would be one more kind: a module that writes the source's documents into a folder, as
ingest/sync.py does for the three here (docs/decisions/0035-sources-and-sync.md).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from search.config import read_setting_file, redact_url
from search.errors import ConfigError

KINDS = ("git", "folder", "archive")
_KEYS = {
    "git": {"git", "branch", "path", "token_env", "token_user", "link"},
    "folder": {"folder"},
    "archive": {"archive"},
}
# A source name is one path segment a scope glob and a citation read plainly: letters,
# digits, "-", "_" and "." (not first), at most 64 characters: no "/", "..", space,
# glob character or leading dot (a hidden folder) (docs/decisions/0035-sources-and-sync.md).
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A branch name git would accept, without the characters that would make it an option or
# a refspec (":", "^", "~", spaces, a leading "-").
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/@+-]{1,200}(?<![./])$")
_HEADER = re.compile(r"^\s*\[([^\]]*)\]\s*(?:#.*)?$")

# Web views of a file at a commit, by forge: {commit} and {path} are filled in per document.
FORGE_LINKS = {
    "github": "https://{host}/{repo}/blob/{commit}/{path}",
    "gitlab": "https://{host}/{repo}/-/blob/{commit}/{path}",
    "gitea": "https://{host}/{repo}/src/commit/{commit}/{path}",
    "bitbucket": "https://{host}/{repo}/src/{commit}/{path}",
}


@dataclass(frozen=True)
class Source:
    name: str
    kind: str  # one of KINDS
    location: str  # the git URL or path, the folder, the archive
    branch: str | None = None
    path: str = ""  # the repository's sub-folder ("" = all of it)
    token_env: str | None = None
    token_user: str = "x-access-token"
    link: str | None = None  # {commit} and {path} template, set or known from the forge

    def describe(self) -> str:
        where = redact_url(self.location) if self.kind == "git" else self.location
        return f"{self.name} ({self.kind} {where})"


def forge_link(url: str) -> str | None:
    """The web view template of a file at a commit for a repository on a known forge
    (GitHub, GitLab, Gitea/Codeberg, Bitbucket), or None (a local path, an unknown host)."""
    m = re.match(r"^(?:ssh://)?[^@/\s]+@([^:/\s]+)[:/](.+)$", url)  # git@host:org/repo.git
    if m and not url.startswith(("http://", "https://")):
        host, repo = m.group(1), m.group(2)
    elif url.startswith(("http://", "https://")):
        parts = urlsplit(url)
        host, repo = parts.hostname or "", parts.path
    else:
        return None
    repo = repo.strip("/").removesuffix(".git").strip("/")
    host = host.lower()
    if not host or repo.count("/") < 1:
        return None
    if host == "github.com" or host.startswith("github."):
        forge = "github"
    elif "gitlab" in host:
        forge = "gitlab"
    elif host == "codeberg.org" or "gitea" in host or "forgejo" in host:
        forge = "gitea"
    elif host == "bitbucket.org":
        forge = "bitbucket"
    else:
        return None
    return FORGE_LINKS[forge].replace("{host}", host).replace("{repo}", repo)


def load_sources(path: Path) -> list[Source]:
    """Read and check the sources file; any problem is a ConfigError naming the line."""
    path = Path(path)
    text = read_setting_file(path, "CITEBOT_SOURCES", "the sources TOML file")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"bad setting: CITEBOT_SOURCES: {path} is not valid TOML: {exc}; fix that "
            "line (strings need quotes, tables look like [sources.handbook])"
        ) from None
    except RecursionError:
        raise ConfigError(
            f"bad setting: CITEBOT_SOURCES: {path} nests too deeply to read; "
            "fix: one [sources.NAME] table per source, with plain keys"
        ) from None
    return _Parser(path, text).parse(data)


class _Parser:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, table: str, key: str | None = None) -> int | None:
        current = None
        for n, line in enumerate(self.lines, 1):
            m = _HEADER.match(line)
            if m:
                current = ".".join(p.strip().strip("\"'") for p in m.group(1).split("."))
                if key is None and current == table:
                    return n
                continue
            if key is not None and current == table and re.match(rf"^\s*{re.escape(key)}\s*=", line):
                return n
        return None

    def fail(self, table: str, key: str | None, problem: str, fix: str) -> ConfigError:
        line = self.line_of(table, key) or self.line_of(table)
        where = f"{self.path} line {line}" if line else str(self.path)
        return ConfigError(f"bad setting: CITEBOT_SOURCES: {where} ([{table}]): {problem}; fix: {fix}")

    def parse(self, data: dict[str, Any]) -> list[Source]:
        extra = sorted(k for k in data if k != "sources")
        if extra:
            raise ConfigError(
                f"bad setting: CITEBOT_SOURCES: {self.path}: unknown table or key "
                f"{extra[0]!r}; fix: put each source in a [sources.NAME] table"
            )
        tables = data.get("sources")
        if not isinstance(tables, dict) or not tables:
            raise ConfigError(
                f"bad setting: CITEBOT_SOURCES: {self.path} names no source; fix: add "
                '[sources.handbook] with git = "https://…", folder = "/path" or archive = "/path.zip"'
            )
        out = []
        for name, table in tables.items():
            where = f"sources.{name}"
            if not _NAME.match(name):
                raise self.fail(
                    where,
                    None,
                    f"the name {name!r} is not a plain path segment",
                    "use letters, digits, '-', '_' or '.', not first, up to 64 characters",
                )
            if not isinstance(table, dict):
                raise self.fail(
                    where,
                    None,
                    "is a value, not a table",
                    f"write [sources.{name}] on its own line and the keys below it",
                )
            out.append(self.source(name, table))
        return out

    def text(self, where: str, table: dict[str, Any], key: str) -> str | None:
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, key, f"{key} must be a non-empty string", f'{key} = "…" in quotes')
        return value.strip()

    def source(self, name: str, table: dict[str, Any]) -> Source:
        where = f"sources.{name}"
        kinds = [k for k in KINDS if k in table]
        if len(kinds) != 1:
            problem = "names no kind" if not kinds else f"names {' and '.join(kinds)}"
            raise self.fail(
                where,
                None,
                problem,
                'give exactly one of git = "URL or path", folder = "/path", archive = "/path/export.zip"',
            )
        kind = kinds[0]
        unknown = sorted(set(table) - _KEYS[kind])
        if unknown:
            raise self.fail(
                where,
                unknown[0],
                f"unknown key {unknown[0]!r} for a {kind} source",
                f"use only {', '.join(sorted(_KEYS[kind]))}",
            )
        location = self.text(where, table, kind) or ""
        if kind == "archive" and not location.lower().endswith(".zip"):
            raise self.fail(where, kind, f"{location!r} is not a .zip file", "export the space as a .zip")
        if kind != "git":
            return Source(name, kind, location)
        if "@" in location.split("://", 1)[-1].split("/", 1)[0] and "://" in location:
            raise self.fail(
                where,
                "git",
                f"the URL {redact_url(location)!r} carries credentials",
                'take them out and set token_env = "VARIABLE" naming where the token is',
            )
        branch = self.text(where, table, "branch")
        if branch is not None and not _BRANCH.match(branch):
            raise self.fail(where, "branch", f"{branch!r} is not a branch name", 'e.g. branch = "main"')
        sub = (self.text(where, table, "path") or "").strip("/")
        if sub and (sub.startswith("-") or any(p in ("", ".", "..") for p in sub.split("/")) or ":" in sub):
            raise self.fail(
                where,
                "path",
                f"{sub!r} is not a folder of the repository",
                'a relative folder without "..", e.g. path = "content"',
            )
        token_env = self.text(where, table, "token_env")
        if token_env is not None and not _ENV.match(token_env):
            raise self.fail(
                where,
                "token_env",
                f"{token_env!r} is not an environment variable name",
                'name the variable, not the token: token_env = "HANDBOOK_TOKEN"',
            )
        if token_env is not None and not location.startswith("https://"):
            raise self.fail(
                where,
                "token_env",
                "a token is sent over https only",
                "use the repository's https:// URL, or drop token_env",
            )
        token_user = self.text(where, table, "token_user") or "x-access-token"
        link = self.text(where, table, "link")
        if link is not None and (
            not link.startswith(("https://", "http://")) or "{path}" not in link or "{commit}" not in link
        ):
            raise self.fail(
                where,
                "link",
                f"{link!r} is not a link template",
                "an http(s) address with {commit} and {path}, e.g. "
                '"https://git.example.com/org/repo/src/{commit}/{path}"',
            )
        return Source(name, kind, location, branch, sub, token_env, token_user, link or forge_link(location))
