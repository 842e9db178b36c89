"""Composing an answer from passages: the shared result type and the extractive composer.

Without an API key the answer is extractive: the passages' best sentences quoted
verbatim, each with its [N], checked by the same code as a model's answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from bot.answer.passages import Passage
from bot.answer.sentences import split_sentences
from search.glossary import Expansion, GlossaryEntry
from search.text import content_words, words

EXTRACTIVE = "extractive"

_HAS_DOUBLE_QUOTE = re.compile(r"[\"“”„]")
# A sentence that asks a question answers none: an FAQ's "How often does a Train
# depart?" scored above the answer below it for "How often does the Release Train leave?".
_ASKS = re.compile(r"\?[)\]'’]*$")

# Sentences quoted in an extractive answer: at most this many...
EXTRACT_MAX_SENTENCES = 3
# ...and a further sentence only if it scores at least this share of the best one.
EXTRACT_RELATIVE_FLOOR = 0.8
# Sentences shorter than this say too little on their own ("See below.").
EXTRACT_MIN_WORDS = 5
# Score mix: meaning (cosine with the question) and the question's words present.
DENSE_WEIGHT = 0.6
LEXICAL_WEIGHT = 0.4
# Earlier passages ranked better: a small prior for sentences from them.
RANK_BONUS = (0.06, 0.03, 0.0)


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
    ) -> Composition: ...


@dataclass(frozen=True)
class Sentence:
    passage: int
    text: str


class ExtractiveComposer:
    """Quotes the sentences of the passages that best answer the question."""

    def __init__(self, encode_texts: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.encode_texts = encode_texts

    def pick(self, question: str, passages: Sequence[Passage], aliases: Sequence[Expansion]) -> list[Sentence]:
        terms = set(content_words(question)) | {
            w for e in aliases for w in content_words(e.expands_to)
        }
        candidates: list[tuple[int, str]] = []
        for p in passages:
            for s in split_sentences(p.text):
                if (len(s.split()) >= EXTRACT_MIN_WORDS and not _HAS_DOUBLE_QUOTE.search(s)
                        and not _ASKS.search(s)):
                    candidates.append((p.number, s))
        if not candidates:
            return []
        vectors = self.encode_texts([question] + [s for _, s in candidates])
        q, sv = vectors[0], vectors[1:]
        dense = sv @ q
        scored = []
        for (number, s), d in zip(candidates, dense):
            present = set(words(s))
            lexical = len(terms & present) / len(terms) if terms else 0.0
            bonus = RANK_BONUS[number - 1] if number - 1 < len(RANK_BONUS) else 0.0
            scored.append((DENSE_WEIGHT * float(d) + LEXICAL_WEIGHT * lexical + bonus, number, s))
        scored.sort(key=lambda x: -x[0])
        best = scored[0][0]
        # Best first: the reader sees the most direct sentence before the context.
        chosen = [x for x in scored[:EXTRACT_MAX_SENTENCES] if x[0] >= EXTRACT_RELATIVE_FLOOR * best]
        return [Sentence(n, s) for _, n, s in chosen]

    def compose(
        self,
        question: str,
        passages: Sequence[Passage],
        definitions: Sequence[GlossaryEntry],
        aliases: Sequence[Expansion],
    ) -> Composition:
        picked = self.pick(question, passages, aliases)
        if not picked:
            return Composition(
                text="", composer=EXTRACTIVE, refused=True,
                refusal_reason="no sentence in the retrieved passages could be quoted",
            )
        lines = [f'"{s.text}" [{s.passage}]' for s in picked]
        return Composition(
            text="The collection says:\n" + "\n".join(f"• {line}" for line in lines),
            composer=EXTRACTIVE,
            label="extractive answer: the passages' own sentences, no model wrote this",
        )
