"""Scopes: which sources a question may be answered from. Access control, not ranking.

A scope is a set of globs over source paths as citations show them (`Chunk.source`).
Both stores apply it inside the search (a filter in the Elasticsearch query, a predicate
in the embedded store's SQL and vector scan), in every read retrieval makes: both arms,
phrase and rare-term lookups, document frequencies, the chunk count and the vocabulary.
So a passage outside the scope is never retrieved, counted, shown or sent to a model.

Glob syntax (anchored: a pattern matches the whole source path):
    **      any run of characters, "/" included ("**/" also matches no folder at all)
    *       any run of characters within one path segment (no "/")
    ?       one character other than "/"
Everything else is literal. `["**"]` is the whole collection.

What a scope does not hide: BM25's term weights (idf) are collection-wide in both stores
(FTS5's bm25() cannot be restricted, and Elasticsearch's BM25 weighs over the index), so the
order of in-scope passages can depend on how common a word is elsewhere. That is a ranking
weight, never a passage, a count shown to a person, or text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

EVERYTHING = "**"


def _translate(pattern: str, any_folders: str, literal) -> str:
    """A glob in a regular-expression dialect: `**/` is any folders (or none), `**` anything,
    `*` and `?` stay inside one path segment, every other character is literal."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append(any_folders)
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(literal(pattern[i]))
            i += 1
    return "".join(out)


def glob_regex(pattern: str) -> str:
    """The glob as a Python regular expression (to be matched with fullmatch)."""
    return _translate(pattern, "(?:.*/)?", re.escape)


def glob_lucene(pattern: str) -> str:
    """The glob as a Lucene regexp (Elasticsearch `regexp` query; anchored by Lucene)."""
    return _translate(pattern, "(.*/)?", lambda ch: ch if ch.isalnum() else "\\" + ch)


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{glob_regex(p)})" for p in patterns) or "(?!)", re.DOTALL)


@dataclass(frozen=True)
class Scope:
    """A named set of source globs. `name` says where it came from ("channels.C0123")."""

    globs: tuple[str, ...]
    name: str = "scope"

    @property
    def everything(self) -> bool:
        return EVERYTHING in self.globs

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.globs)

    def allows(self, source: str) -> bool:
        return self.everything or self.regex.fullmatch(source) is not None

    def allows_each(self, sources: Sequence[str]) -> list[bool]:
        """`allows` for each of these sources, in order, each distinct one judged once."""
        verdict = {s: self.allows(s) for s in set(sources)}
        return [verdict[s] for s in sources]

    @property
    def key(self) -> tuple[str, ...]:
        """Equal for scopes that allow the same sources (cache key)."""
        return () if self.everything else tuple(sorted(set(self.globs)))

    def describe(self) -> str:
        return ", ".join(self.globs) if self.globs else "nothing"


def limiting(scope: Scope | None) -> Scope | None:
    """The scope when it restricts anything, else None (the unfiltered fast path)."""
    return None if scope is None or scope.everything else scope
