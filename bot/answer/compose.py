"""Composing an answer from passages: the shared result type and the extractive composer.

Without an API key the answer is extractive: the passages' sentences that answer,
quoted verbatim, each with its [N], checked by the same code as a model's answer.

How the extractive composer chooses (every sentence of every passage is a candidate; a
list item, a table row and a code line are sentences of their own, because the one
splitter ends a sentence at every line break):

1. Evidence in words, for every candidate, cheaply: the question's terms that the sentence
   holds, each weighted by how rare it is among the candidates (a term every sentence
   holds tells them apart no better than none does), with light stemming ("leaves" finds
   "leave"); the question's word pairs found as phrases; the sentence's neighbours and its
   heading as context (an answer often follows a lead-in, or sits under a heading that
   names the subject); an answer-type cue (a number for "how many", a name for "who", a
   command for "how do I").
2. Meaning, for a shortlist only: the question and the best SHORTLIST candidates are
   embedded in one batch and their cosine joins the score. Embedding every sentence of
   every passage cost 700-1,100 ms a turn; the shortlist keeps compose near 100 ms.
3. Fewer, better quotes: the best sentence, and others only when they score close to it;
   a sentence that leads in with a colon, or is very short, brings the line after it,
   and one that opens with "This"/"It" brings the sentence before it, so the quote reads
   on its own. A double quote mark inside a sentence is quoted as a single one
   (bot/answer/quoting.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Protocol, TypeGuard

import numpy as np

from bot.answer.cues import CODE, answer_cues
from bot.answer.cues import cues as answer_type_cues
from bot.answer.passages import Passage
from bot.answer.quoting import quotation
from bot.answer.sentences import sentence_spans
from search.glossary import Expansion, GlossaryEntry
from search.text import STOPWORDS, words

EXTRACTIVE = "extractive"
LABEL = "extractive answer: the passages' own sentences, no model wrote this"

# A sentence that asks a question answers none: an FAQ's "How often does a Train
# depart?" scored above the answer below it for "How often does the Release Train leave?".
_ASKS = re.compile(r"\?[)\]'’]*$")

# Quotes in an extractive answer: at most this many...
EXTRACT_MAX_SENTENCES = 3
# ...and a further one only if it scores at least this share of the best one.
EXTRACT_RELATIVE_FLOOR = 0.8
# Sentences shorter than this say too little on their own ("See below."); a line that
# looks like code or a table row may be shorter.
EXTRACT_MIN_WORDS = 5
EXTRACT_MIN_WORDS_CODE = 3
# Longer candidates are cut to this many characters for embedding only (the model's
# window is 256 tokens and a token is never shorter than a character; the quotation is
# always the whole sentence).
EMBED_MAX_CHARS = 240
# Candidates embedded per turn: the best this many by evidence in words.
SHORTLIST = 8
# The score: meaning and words, then the context and cue terms, then a prior for passages
# ranked higher by retrieval.
DENSE_WEIGHT = 0.6
LEXICAL_WEIGHT = 0.4
PHRASE_WEIGHT = 0.05  # per question word pair found as a phrase, at most 2 (0.15 cost 3 of 94 dev items)
NEIGHBOUR_WEIGHT = 0.25  # times the better neighbour's word evidence
HEADING_WEIGHT = 0.1  # times the heading's word evidence
CUE_WEIGHT = 0.1
RANK_BONUS = (0.06, 0.03, 0.0)
# Times the cosine of the question with the embedding window (paragraph group) that holds
# the sentence (Passage.windows, read from the store: the vectors retrieval already
# searched, so nothing more is embedded): where in a passage the question's meaning lies
# when a paraphrase shares few words with the answering sentence
# (docs/decisions/0010-window-prior.md). 0.9 over 0.3 quotes a label for 9 more of 269
# held-out items, +0.033 [+0.004, +0.063] (docs/decisions/0067-window-weight.md).
WINDOW_WEIGHT = 0.9
# A quote this long is enough; no neighbour is added to it.
LONG_QUOTE_CHARS = 300
# A sentence this short rarely answers alone ("tune.lua.forced-yield <nb>" above its
# definition): the sentence after it joins the quote.
SHORT_SENTENCE_WORDS = 8
FOLLOW_ON = True
# How many sentences past the best one (in its paragraph) a where/when/who answer is looked
# for when the best one gives none (docs/decisions/0031-sentence-choice-inner-quotes.md).
CUE_LOOKAHEAD = 3

_ANAPHOR = re.compile(r"^(this|that|these|those|it|they|such|then|there|here)\b", re.IGNORECASE)
_LEAD_IN = re.compile(r":\s*$")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s")


def stem(word: str) -> str:
    """A light stem, enough to meet "leaves" with "leave" and "retries" with "retry"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            return base + "y" if suffix in ("ies", "ied") else base
    return word


def terms_of(text: str) -> list[str]:
    """The content words of a text, stemmed, in order, repeats kept."""
    return [stem(w) for w in words(text) if w not in STOPWORDS]


@dataclass
class Composition:
    """What a composer produced, before checks."""

    text: str
    composer: str
    refused: bool = False
    refusal_reason: str | None = None
    model: str | None = None
    label: str | None = None  # shown to the reader, e.g. why this is a fallback answer
    usage: dict[str, int] = field(default_factory=dict)
    prompt_chars: int = 0
    prompt: str | None = None
    errors: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


class Composer(Protocol):
    def compose(
        self,
        question: str,
        passages: Sequence[Passage],
        definitions: Sequence[GlossaryEntry],
        aliases: Sequence[Expansion],
        *,
        closest: bool = False,  # the gate judged the evidence weak (bot.answer.gate)
    ) -> Composition: ...


class StreamingComposer(Composer, Protocol):
    """A composer that writes as a stream (`streams = True`, as Claude's does): compose hands
    each piece of text to `on_text` as it arrives."""

    streams: bool

    def compose(
        self,
        question: str,
        passages: Sequence[Passage],
        definitions: Sequence[GlossaryEntry],
        aliases: Sequence[Expansion],
        on_text: Callable[[str], None] | None = None,
        *,
        closest: bool = False,
    ) -> Composition: ...


def streams(composer: Composer) -> TypeGuard[StreamingComposer]:
    """Whether the composer says it streams (a true `streams` attribute)."""
    return bool(getattr(composer, "streams", False))


@dataclass(frozen=True)
class Sentence:
    """A quotation chosen for the answer: its passage, its text and its place in it."""

    passage: int
    text: str
    start: int = 0
    end: int = 0
    score: float = 0.0


@dataclass
class _Candidate:
    passage: Passage
    index: int  # position among the passage's sentences
    start: int
    end: int
    text: str
    terms: set[str]
    quotable: bool
    words_score: float = 0.0
    score: float = 0.0


# Chinese and Japanese put no space between words: a run of Han or kana counts a word per two
# characters (a Chinese word averages about one and a half), or every sentence of theirs,
# ended at its 。 (bot.answer.sentences), would count one word, too short to quote.
_UNSPACED_WORDS = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]+")


def word_count(text: str) -> int:
    """The words of a text: its pieces between white space, or, in a text holding Han or
    kana, a word per two characters of each run of them and the other pieces that hold a
    letter or a digit (not the 。 and 「」 around the runs)."""
    runs = _UNSPACED_WORDS.findall(text)
    if not runs:
        return len(text.split())
    rest = _UNSPACED_WORDS.sub(" ", text).split()
    return sum(1 for piece in rest if any(c.isalnum() for c in piece)) + sum((len(r) + 1) // 2 for r in runs)


def _quotable(text: str) -> bool:
    n = word_count(text)
    short_ok = n >= EXTRACT_MIN_WORDS or (n >= EXTRACT_MIN_WORDS_CODE and bool(CODE.search(text)))
    return short_ok and not _ASKS.search(text)


class ExtractiveComposer:
    """Quotes the sentences of the passages that best answer the question."""

    reads_windows = True  # the Answerer gives it Passage.windows (WINDOW_WEIGHT)

    def __init__(
        self,
        encode_texts: Callable[[Sequence[str]], np.ndarray] | None,
        *,
        shortlist: int = SHORTLIST,
        encode_query: Callable[[str], np.ndarray] | None = None,
    ) -> None:
        self.encode_texts = encode_texts
        self.shortlist = shortlist
        # A question longer than EMBED_MAX_CHARS may not fit the model's window: it is
        # embedded as retrieval embeds it (the mean of its windows), or without
        # `encode_query` as its first EMBED_MAX_CHARS characters, never refused.
        self.encode_query = encode_query

    # -- choosing ------------------------------------------------------------------------
    def candidates(self, passages: Sequence[Passage]) -> list[list[_Candidate]]:
        out = []
        for p in passages:
            row = []
            for i, (a, b) in enumerate(sentence_spans(p.text, wrapped=True)):
                text = p.text[a:b]
                row.append(_Candidate(p, i, a, b, text, set(terms_of(text)), _quotable(text)))
            out.append(row)
        return out

    def pick(self, question: str, passages: Sequence[Passage], aliases: Sequence[Expansion]) -> list[Sentence]:
        rows = self.candidates(passages)
        flat = [c for row in rows for c in row]
        quotable = [c for c in flat if c.quotable]
        if not quotable:
            return []
        q_terms = list(dict.fromkeys(terms_of(question)))
        alias_terms = [t for e in aliases for t in terms_of(e.expands_to) if t not in q_terms]
        # Rarity among the candidates: idf over sentences, a term's weight in [0, ~log N].
        n = len(flat)
        sf: dict[str, int] = {}
        for c in flat:
            for t in c.terms:
                sf[t] = sf.get(t, 0) + 1
        weights = {t: math.log(1 + n / sf[t]) for t in q_terms if t in sf}
        weights.update({t: 0.5 * math.log(1 + n / sf[t]) for t in alias_terms if t in sf})
        total = sum(weights.values())

        def evidence(terms: set[str]) -> float:
            return sum(w for t, w in weights.items() if t in terms) / total if total else 0.0

        windows = {p.number: p.windows for p in passages}

        def window_score(c: _Candidate) -> float:
            return next((w.score for w in windows[c.passage.number] if w.start <= c.start < w.end), 0.0)

        pairs = list(pairwise(q_terms))
        cues = answer_type_cues(question)
        headings: dict[int, float] = {}
        for c in flat:
            c.words_score = evidence(c.terms)
        for row in rows:
            for c in row:
                if not c.quotable:
                    continue
                seq = terms_of(c.text)
                phrase = sum(1 for a, b in pairs if any(x == a and y == b for x, y in pairwise(seq)))
                neighbours = [row[j].words_score for j in (c.index - 1, c.index + 1) if 0 <= j < len(row)]
                number = c.passage.number
                if number not in headings:
                    headings[number] = evidence(set(terms_of(c.passage.heading)))
                cue = sum(1 for test in cues if test(c.text))
                c.score = (
                    LEXICAL_WEIGHT * c.words_score
                    + PHRASE_WEIGHT * min(phrase, 2)
                    + NEIGHBOUR_WEIGHT * max(neighbours, default=0.0)
                    + HEADING_WEIGHT * headings[number]
                    + CUE_WEIGHT * min(cue, 1)
                    + WINDOW_WEIGHT * window_score(c)
                    + (RANK_BONUS[number - 1] if number - 1 < len(RANK_BONUS) else 0.0)
                )
        quotable.sort(key=lambda c: -c.score)
        if self.encode_texts is not None and self.shortlist > 0:
            short = quotable[: self.shortlist]
            vectors, q_vector = self._vectors(question, [c.text[:EMBED_MAX_CHARS] for c in short])
            for c, d in zip(short, vectors @ q_vector):
                c.score += DENSE_WEIGHT * float(d)
            quotable = sorted(short, key=lambda c: -c.score)
        best = quotable[0].score
        chosen = [c for c in quotable[:EXTRACT_MAX_SENTENCES] if c.score >= EXTRACT_RELATIVE_FLOOR * best]
        return self._with_context(self._answer_after(question, chosen, rows), rows)

    @staticmethod
    def _answer_after(question: str, chosen: list[_Candidate], rows: list[list[_Candidate]]) -> list[_Candidate]:
        """For a where/when/who question whose best sentence gives no place, time or person
        beyond the question's own words (cues.answer_cues): the first sentence after it in
        its paragraph, at most CUE_LOOKAHEAD on, that gives one is quoted second. The answer
        often follows the sentence that names the subject."""
        need = answer_cues(question)
        first = chosen[0]
        if not need or any(test(first.text) for test in need):
            return chosen
        row = next(r for r in rows if r and r[0].passage.number == first.passage.number)
        for c in row[first.index + 1 : first.index + 1 + CUE_LOOKAHEAD]:
            if "\n\n" in first.passage.text[first.end : c.start]:
                break
            if c.quotable and any(test(c.text) for test in need):
                rest = [x for x in chosen[1:] if x is not c]
                return [first, c, *rest][:EXTRACT_MAX_SENTENCES]
        return chosen

    def _vectors(self, question: str, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The candidates' vectors and the question's: one batch when the question is short."""
        assert self.encode_texts is not None
        if len(question) <= EMBED_MAX_CHARS or self.encode_query is None:
            vectors = self.encode_texts([question[:EMBED_MAX_CHARS]] + texts)
            return vectors[1:], vectors[0]
        return self.encode_texts(texts), self.encode_query(question)

    @staticmethod
    def _with_context(chosen: list[_Candidate], rows: list[list[_Candidate]]) -> list[Sentence]:
        """Each chosen sentence as a quotation that reads on its own: a lead-in ending in a
        colon brings the line after it, an opening "This"/"It" the sentence before it.
        Quotations that would overlap are merged; adjacent ones stay apart."""
        by_passage = {row[0].passage.number: row for row in rows if row}
        spans: list[tuple[int, int, int, float]] = []  # passage, first index, last index, score
        for c in chosen:
            row = by_passage[c.passage.number]
            first = last = c.index
            if len(c.text) < LONG_QUOTE_CHARS:
                short = word_count(c.text) < SHORT_SENTENCE_WORDS
                if (_LEAD_IN.search(c.text) or short) and last + 1 < len(row) and row[last + 1].quotable:
                    last += 1
                elif _ANAPHOR.search(c.text) and first > 0 and row[first - 1].quotable:
                    first -= 1
                elif (
                    FOLLOW_ON
                    and last + 1 < len(row)
                    and row[last + 1].quotable
                    and "\n\n" not in c.passage.text[c.end : row[last + 1].start]
                    and row[last + 1].end - c.start <= LONG_QUOTE_CHARS
                ):
                    last += 1
            merged = False
            for k, (n, a, b, s) in enumerate(spans):
                if n == c.passage.number and first <= b and last >= a:
                    spans[k] = (n, min(a, first), max(b, last), s)
                    merged = True
                    break
            if not merged:
                spans.append((c.passage.number, first, last, c.score))
        out = []
        for n, a, b, s in spans:
            row = by_passage[n]
            text = quotation(row[a].passage.text[row[a].start : row[b].end])
            out.append(Sentence(n, text, row[a].start, row[b].end, s))
        return out

    # -- writing ---------------------------------------------------------------------------
    def compose(
        self,
        question: str,
        passages: Sequence[Passage],
        definitions: Sequence[GlossaryEntry],
        aliases: Sequence[Expansion],
        *,
        closest: bool = False,  # the quotes are the same; the turn labels the answer
    ) -> Composition:
        picked = self.pick(question, passages, aliases)
        if not picked:
            return Composition(
                text="",
                composer=EXTRACTIVE,
                refused=True,
                refusal_reason="no sentence in the retrieved passages could be quoted",
            )
        by_number = {p.number: p for p in passages}
        return Composition(text=render(question, picked, by_number), composer=EXTRACTIVE, label=LABEL)


_UNSAFE_IN_HEADER = re.compile(r"[\"“”„\[\]]")


def source_line(p: Passage) -> str:
    """Where a group of quotes comes from: the source and its heading (no quote marks or
    brackets, so the checks never read it as a quotation or a citation)."""
    where = p.chunk.source + (f" — {' › '.join(p.chunk.heading_path)}" if p.chunk.heading_path else "")
    if p.chunk.page:
        where += f", p. {p.chunk.page}"
    return _UNSAFE_IN_HEADER.sub("", where)


def needs_lead(question: str, first: Sentence) -> bool:
    """Whether the quotes alone would not say what they answer: the first quotation holds
    none of the question's words."""
    q = set(terms_of(question))
    return bool(q) and not (q & set(terms_of(first.text)))


def render(question: str, picked: Sequence[Sentence], passages: dict[int, Passage]) -> str:
    """The answer text: a lead, then the quotes grouped by source (the group of the most
    direct quote first; within a group, best first), each `"text" [N]` on its own line."""
    lines = []
    if needs_lead(question, picked[0]):
        asked = " ".join(_UNSAFE_IN_HEADER.sub("", question).split())
        lines.append(f"You asked: {asked[:160]}")
    lines.append("The collection says:")
    groups: dict[str, list[Sentence]] = {}
    for s in picked:
        groups.setdefault(source_line(passages[s.passage]), []).append(s)
    for where, quotes in groups.items():
        lines.append(f"From {where}:")
        lines.extend(f'• "{q.text}" [{q.passage}]' for q in quotes)
    return "\n".join(lines)
