"""Checks in code, after an answer is written (or, streamed, after each of its sentences);
none rewrites the answer: `flag_inline` only adds a mark and a reason after each failure.

- citations: every [N] resolves to a passage given this turn;
- quotations: every double-quoted span followed by [N] is found in passage N through one
  normaliser applied to both sides, so honest typography (curly quotes, dash variants,
  spacing, ellipsis forms, letter case, a link quoted with its address shown) passes and
  invented text fails; a quote found only in another passage is flagged as mis-cited,
  not as invented;
- claims (optional): a judge says whether each cited sentence follows from the passages
  it cites; the types live here, the judge (a model) in bot.claude.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.answer import sentences
from bot.answer.textlinks import visible_links

ELLIPSIS = "\u2026"  # the one sentinel every ellipsis form becomes

# Every quote mark, straight or curly, single or double, reads as one: the extractive
# composer quotes a source's "inner" quotation as 'inner' (bot/answer/quoting.py), and a
# model may do the same.
_QUOTES = {
    c: "'"
    for c in '"\u2018\u2019\u201a\u201b\u2032\u2035\u0060\u00b4'
    "\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb\u301d\u301e"
}
# The whole dash range: hyphen, non-breaking hyphen, figure dash, en, em, horizontal bar,
# minus, small and full-width hyphen-minus.
_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d\u2e3a\u2e3b"
# The blanks before a dash or an ellipsis are matched from their first one only ((?<!\s)):
# searched from every blank of a long run, "\s*" would read the run once per blank.
_DASH_RE = re.compile(r"(?:(?<!\s)\s+)?[" + _DASHES + r"-]+\s*")
_ELLIPSIS_RE = re.compile(r"(?:(?<!\s)\s+)?(?:\u2026|\.\s?\.\s?\.)\s*")
_SPACE_RE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """The one normaliser: both the quotation and the source go through it."""
    text = unicodedata.normalize("NFKC", text)  # also folds non-breaking spaces
    # The prompt escapes "<" of a tag of ours inside passage text (bot/answer/prompt.py):
    # a model quoting the escaped form quotes the document.
    text = text.replace("&lt;", "<")
    text = "".join(_QUOTES.get(c, c) for c in text)
    text = _ELLIPSIS_RE.sub(" " + ELLIPSIS + " ", text)
    text = _DASH_RE.sub(" - ", text)
    text = _SPACE_RE.sub(" ", text)
    return text.strip().casefold()


def quote_in(quote: str, source: str) -> bool:
    """Whether the quotation stands in the source; an ellipsis in the quote is a gap. A link
    may be quoted as written or as Slack shows it, with its address (bot.answer.textlinks):
    then both sides are read with their links shown, so a quotation holding one still passes."""
    if _stands_in(quote, source):
        return True
    return _may_hold_links(quote + source) and _stands_in(visible_links(quote), visible_links(source))


def _may_hold_links(text: str) -> bool:
    return "](" in text or "]:" in text or "<" in text or "://" in text


def _stands_in(quote: str, source: str) -> bool:
    q = normalise(quote).strip(" .,;:!?'\"")
    if not q:
        return False
    pieces = [p for p in (p.strip(" .,;:!?'\"") for p in q.split(ELLIPSIS)) if p]
    if not pieces:
        return False
    s = normalise(source)
    pos = 0
    for piece in pieces:
        found = s.find(piece, pos)
        if found < 0:
            return False
        pos = found + len(piece)
    return True


# A quotation: a double-quoted span (straight or curly) followed by its [N] marker.
QUOTE_RE = re.compile(r"[\"\u201c\u201e]([^\"\u201c\u201d\u201e]{3,}?)[\"\u201d]\s*((?:\[\d+\]\s*)+)")
MARKER_RE = re.compile(r"\[(\d+)\]")


@dataclass
class CitationCheck:
    marker: str
    number: int
    chunk_id: str | None
    resolved: bool
    retrieved: bool
    start: int  # position of the marker in the answer


@dataclass
class QuoteCheck:
    text: str
    number: int
    chunk_id: str | None
    verified: bool
    found_in: int | None  # the passage that does hold it, when not the cited one
    start: int
    end: int  # the end of the quotation and its marker in the answer

    @property
    def reason(self) -> str:
        if self.verified:
            return "verified"
        if self.chunk_id is None:
            return "cites a passage that was not given"
        if self.found_in is not None:
            return f"mis-cited: the words are in [{self.found_in}], not [{self.number}]"
        return f"not found in passage [{self.number}]"


@dataclass
class ClaimCheck:
    """The judge's verdict on one cited sentence."""

    sentence: str
    numbers: list[int]  # the passages it cites (those given this turn)
    start: int
    end: int  # the end of the sentence and its markers in the answer
    supported: bool | None  # None: no verdict (the judge failed or its budget ran out)
    reason: str


@dataclass
class ClaimReport:
    """Every claim judged in one turn, with what judging cost."""

    claims: list[ClaimCheck] = field(default_factory=list)
    model: str | None = None
    calls: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    latency_ms: float = 0.0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "judged": sum(1 for c in self.claims if c.supported is not None),
            "unsupported": sum(1 for c in self.claims if c.supported is False),
            "unjudged": sum(1 for c in self.claims if c.supported is None),
            "model": self.model,
            "calls": self.calls,
            "usage": dict(self.usage),
            "latency_ms": self.latency_ms,
            "errors": list(self.errors),
            "items": [
                {
                    "sentence": c.sentence,
                    "markers": [f"[{n}]" for n in c.numbers],
                    "supported": c.supported,
                    "reason": c.reason,
                }
                for c in self.claims
            ],
        }


class ClaimJudge(Protocol):
    """Judges each cited sentence of an answer against the passages (N -> text) it cites."""

    def judge(self, answer: str, passages: Mapping[int, str]) -> ClaimReport: ...


@dataclass
class CheckReport:
    citations: list[CitationCheck] = field(default_factory=list)
    quotes: list[QuoteCheck] = field(default_factory=list)
    claims: list[ClaimCheck] = field(default_factory=list)

    @property
    def valid_citations(self) -> int:
        return sum(1 for c in self.citations if c.resolved and c.retrieved)

    @property
    def failures(self) -> int:
        return (
            sum(1 for c in self.citations if not (c.resolved and c.retrieved))
            + sum(1 for q in self.quotes if not q.verified)
            + sum(1 for c in self.claims if c.supported is False)
        )


@dataclass(frozen=True)
class CitedSentence:
    """A sentence of an answer that carries at least one [N] marker."""

    text: str  # without its markers
    numbers: tuple[int, ...]
    start: int
    end: int  # after its last marker (and closing punctuation)


# A quotation may hold full stops and line breaks: a sentence end inside one is no end,
# except a blank line, which always ends a sentence.
_MARKER_WITH_SPACE = re.compile(r"(?:(?<!\s)\s+)?\[\d+\]")  # (?<!\s): as _DASH_RE
_LEAD = re.compile(r"^[\s\u2022*\-\u2013\u2014]+")


def inside_quotation(text: str, pos: int) -> bool:
    before = text[:pos]
    return before.count('"') % 2 == 1 or before.count("\u201c") > before.count("\u201d")


def cited_sentences(answer: str) -> list[CitedSentence]:
    """The sentences of an answer that cite a passage, with their spans."""
    spans: list[tuple[int, int]] = []
    start = 0
    # inside_quotation(answer, end), counted on from the last end rather than from the start
    counted, straight, opening, closing = 0, 0, 0, 0
    for m in sentences.ends(answer):
        blank_line = not m.group(0).strip() and m.group(0) != "\n"
        piece, counted = answer[counted : m.end()], m.end()
        straight += piece.count('"')
        opening += piece.count("\u201c")
        closing += piece.count("\u201d")
        if not blank_line and (straight % 2 == 1 or opening > closing):
            continue
        spans.append((start, m.end()))
        start = m.end()
    spans.append((start, len(answer)))
    out = []
    for a, b in spans:
        segment = answer[a:b]
        numbers = tuple(dict.fromkeys(int(n) for n in MARKER_RE.findall(segment)))
        if not numbers:
            continue
        lead = _LEAD.match(segment)
        a += lead.end() if lead else 0
        b = a + len(answer[a:b].rstrip())
        text = " ".join(_MARKER_WITH_SPACE.sub("", answer[a:b]).split())
        if text:
            out.append(CitedSentence(text, numbers, a, b))
    return out


def check_answer(answer: str, passages: dict[int, tuple[str, str]], retrieved_ids: set[str]) -> CheckReport:
    """Check an answer against the passages given this turn.

    passages maps N to (chunk_id, passage text as given); retrieved_ids is every chunk
    retrieved for this turn's question.
    """
    report = CheckReport()
    for m in MARKER_RE.finditer(answer):
        n = int(m.group(1))
        given = passages.get(n)
        chunk_id = given[0] if given else None
        report.citations.append(
            CitationCheck(
                marker=m.group(0),
                number=n,
                chunk_id=chunk_id,
                resolved=given is not None,
                retrieved=chunk_id in retrieved_ids if chunk_id else False,
                start=m.start(),
            )
        )
    for m in QUOTE_RE.finditer(answer):
        quote = m.group(1)
        for marker in MARKER_RE.finditer(m.group(2)):
            n = int(marker.group(1))
            given = passages.get(n)
            verified = given is not None and quote_in(quote, given[1])
            found_in = None
            if not verified:
                found_in = next(
                    (k for k, (_, text) in sorted(passages.items()) if k != n and quote_in(quote, text)), None
                )
            report.quotes.append(
                QuoteCheck(
                    text=quote,
                    number=n,
                    chunk_id=given[0] if given else None,
                    verified=verified,
                    found_in=found_in,
                    start=m.start(),
                    end=m.end(),
                )
            )
    return report


def flag_inline(answer: str, report: CheckReport) -> str:
    """The answer with a visible mark and a short reason after each failed check."""
    inserts: list[tuple[int, str]] = []
    for q in report.quotes:
        if not q.verified:
            inserts.append((q.end, f" ⚠️ [quote check failed: {q.reason}]"))
    for c in report.citations:
        if not c.resolved:
            inserts.append((c.start + len(c.marker), " ⚠️ [citation points to no passage given]"))
        elif not c.retrieved:
            inserts.append((c.start + len(c.marker), " ⚠️ [citation to a passage not retrieved this turn]"))
    for claim in report.claims:
        if claim.supported is False:
            inserts.append((claim.end, f" ⚠️ [claim check failed: {claim.reason}]"))
    out = answer
    for pos, text in sorted(inserts, key=lambda x: -x[0]):
        pos = min(pos, len(out))
        # Place the flag right after the quote's marker, before the white space that follows
        # it (a quotation's match takes in the spaces and line breaks after its markers).
        while pos > 0 and out[pos - 1].isspace():
            pos -= 1
        out = out[:pos] + text + out[pos:]
    return out
