"""The glossary: our definitions and alias claims, kept apart from source text.

A CSV with columns term,alias and an optional definition. An alias claim says two
names mean the same thing; the lexical arm uses it to search for the other name at
reduced weight, the dense arm embeds the question once more with the other name written
beside the one found (`with_other_names`), and the prompt shows it as our claim, never as
the source's.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from search.config import read_setting_file
from search.errors import ConfigError
from search.marks import MARK_CLASS
from search.text import fold

VARIABLE = "CITEBOT_GLOSSARY"


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


def _whole_word(name: str, flags: int = 0) -> re.Pattern[str]:
    """A name matched as a whole word: no word character, nor a combining mark that a word
    of the scripts in search.marks holds (Python's \\w counts none), right before or after
    it, so "हिन्द" is not found inside "हिन्दी"."""
    return re.compile(rf"(?<![\w])(?<!{MARK_CLASS}){re.escape(name)}(?![\w])(?!{MARK_CLASS})", flags)


def _pattern(name: str) -> re.Pattern[str]:
    return _whole_word(fold(name))


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
        """The glossary CSV CITEBOT_GLOSSARY names; any problem is a ConfigError with the line."""
        text = read_setting_file(path, VARIABLE, "a CSV with the header term,alias[,definition]", encoding="utf-8-sig")
        bad = f"bad setting: {VARIABLE}: {path}"
        reader = csv.DictReader(io.StringIO(text, newline=""))
        try:
            fields = {(h or "").strip().lower() for h in reader.fieldnames or []}
            if not {"term", "alias"} <= fields:
                raise ConfigError(
                    f"{bad} needs a header with columns term,alias (and optionally definition); found {sorted(fields)}"
                )
            entries = []
            for row in reader:
                n = reader.line_num
                if None in row:  # DictReader's key for the cells past the header's
                    raise ConfigError(
                        f"{bad} line {n} has more cells than the header's "
                        f"{len(reader.fieldnames or [])}: put a definition that "
                        'holds commas in double quotes, "like, this"'
                    )
                cells = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
                if not cells.get("term") or not cells.get("alias"):
                    raise ConfigError(f"{bad} line {n}: term and alias must both be set")
                entries.append(GlossaryEntry(cells["term"], cells["alias"], cells.get("definition") or None))
        except csv.Error as exc:  # an unclosed quote, a field past csv's size limit
            raise ConfigError(
                f"{bad} line {reader.reader.line_num} is not CSV: {exc}; fix that line "
                "(a quote opened in a cell must be closed)"
            ) from None
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
            if entry.definition and entry.term not in seen and (term_re.search(folded) or alias_re.search(folded)):
                seen.add(entry.term)
                out.append(entry)
        return out


def with_other_names(question: str, expansions: list[Expansion]) -> str:
    """The question with each expansion's other name in parentheses after the name found
    ("What does the Firehose (Telemetry Ingestion Pipeline) carry?"); at the end when the
    name cannot be placed in the question as written."""
    out = question
    for e in expansions:
        m = _whole_word(e.found, re.IGNORECASE).search(out)
        at = m.end() if m else len(out.rstrip())
        out = f"{out[:at]} ({e.expands_to}){out[at:]}"
    return out
