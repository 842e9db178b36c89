"""The glossary: our definitions and alias claims, kept apart from source text.

A CSV with columns term,alias and an optional definition. An alias claim says two
names mean the same thing; the lexical arm uses it to search for the other name at
reduced weight, and the prompt shows it as our claim, never as the source's.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from search.errors import ConfigError
from search.text import fold


@dataclass(frozen=True)
class GlossaryEntry:
    term: str
    alias: str
    definition: str | None = None


@dataclass(frozen=True)
class Expansion:
    """A name found in the question and the other name the glossary claims it means."""

    found: str
    expands_to: str
    entry: GlossaryEntry


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])" + re.escape(fold(name)) + r"(?![\w])")


class Glossary:
    """Alias claims and definitions, matched against questions by whole words."""

    def __init__(self, entries: list[GlossaryEntry]) -> None:
        self.entries = entries
        self._patterns = [(e, _pattern(e.term), _pattern(e.alias)) for e in entries]

    @classmethod
    def empty(cls) -> Glossary:
        return cls([])

    @classmethod
    def load(cls, path: Path) -> Glossary:
        try:
            with Path(path).open(newline="", encoding="utf-8-sig") as f:
                reader = csv.DictReader(f)
                fields = {(h or "").strip().lower() for h in reader.fieldnames or []}
                if not {"term", "alias"} <= fields:
                    raise ConfigError(
                        f"glossary {path} needs a header with columns term,alias"
                        f" (and optionally definition); found {sorted(fields)}"
                    )
                entries = []
                for n, row in enumerate(reader, start=2):
                    row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
                    if not row.get("term") or not row.get("alias"):
                        raise ConfigError(f"glossary {path} line {n}: term and alias must both be set")
                    entries.append(
                        GlossaryEntry(row["term"], row["alias"], row.get("definition") or None)
                    )
        except OSError as exc:
            raise ConfigError(f"cannot read the glossary CSV {path}: {exc.strerror or exc}") from exc
        return cls(entries)

    def expansions(self, question: str) -> list[Expansion]:
        """Both directions: an alias in the question expands to its term and vice versa."""
        folded = fold(question)
        out: list[Expansion] = []
        for entry, term_re, alias_re in self._patterns:
            if alias_re.search(folded) and not term_re.search(folded):
                out.append(Expansion(entry.alias, entry.term, entry))
            elif term_re.search(folded) and not alias_re.search(folded):
                out.append(Expansion(entry.term, entry.alias, entry))
        return out

    def definitions_for(self, question: str) -> list[GlossaryEntry]:
        """Entries with a definition whose term or alias the question mentions."""
        folded = fold(question)
        seen: set[str] = set()
        out = []
        for entry, term_re, alias_re in self._patterns:
            if entry.definition and entry.term not in seen and (
                term_re.search(folded) or alias_re.search(folded)
            ):
                seen.add(entry.term)
                out.append(entry)
        return out
