"""The question's phrase candidates and those the collection holds rarely: the lexical
arm's phrase addresses (search/retrieve.py, Retriever._lexical_arm)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from search.retrieval_config import (
    PHRASE_CANDIDATES_MAX,
    PHRASE_MAX_CHUNKS,
    PHRASE_MAX_TOKENS,
    PHRASE_MIN_CONTENT,
    STOPWORD_PHRASE_MIN_TOKENS,
)
from search.text import STOPWORDS, joined_terms, words

Gram = tuple[str, ...]


def is_phrase(gram: Gram) -> bool:
    """Whether an n-gram of the question is specific enough to be an address."""
    content = sum(1 for t in gram if t not in STOPWORDS)
    if content >= PHRASE_MIN_CONTENT:
        return gram[0] not in STOPWORDS and gram[-1] not in STOPWORDS
    return len(gram) >= STOPWORD_PHRASE_MIN_TOKENS and content <= len(gram) // 2


def candidates(
    question: str, phrase: Callable[[Gram], bool], joined_rule: bool, quoted: Sequence[Gram] = ()
) -> list[tuple[int, Gram]]:
    """The question's phrase candidates (position, gram), longest first, at most
    PHRASE_CANDIDATES_MAX; `phrase` judges an n-gram (is_phrase); `quoted`: the
    question's quotations (search.text.quoted_terms), read once by the caller."""
    tokens = words(question)
    grams: list[tuple[int, Gram]] = []
    for n in range(min(PHRASE_MAX_TOKENS, len(tokens)), PHRASE_MIN_CONTENT - 1, -1):
        for i in range(len(tokens) - n + 1):
            gram = tuple(tokens[i : i + n])
            if phrase(gram):
                grams.append((i, gram))
    # Words written joined ("analysis_limit", "extensions.worktreeConfig") are one name
    # whatever their words, and words the writer quoted ('golden handcuffs', "Use or
    # Lose") are the documents' own: a phrase candidate of any length from two
    # (docs/decisions/0003-joined-words.md, 0069-quoted-words.md).
    # A quotation of stopwords only ('is a', 'of the') names nothing, as joined words of
    # none but them ("e.g.") do not: held by a few chunks, it would address them and the
    # refusal gate answer an off-topic question outright.
    extra = (joined_terms(question) if joined_rule else []) + [
        g for g in quoted if 2 <= len(g) <= PHRASE_MAX_TOKENS and any(len(t) >= 2 and t not in STOPWORDS for t in g)
    ]
    if extra:
        known = {g for _, g in grams}
        # Where each gram first stands, found by str.find in the tokens written out once,
        # a space on either side of each: no token holds a space, so a match of " a b "
        # is a run of whole tokens. A scan of the places of a gram's first token was
        # quadratic when that token is common ("x " * 20_000 then 256 "x.yN": 1.2 s).
        line = " " + " ".join(tokens) + " "
        token_at: dict[int, int] = {}
        start = 1
        for i, t in enumerate(tokens):
            token_at[start] = i
            start += len(t) + 1
        for gram in extra[:PHRASE_CANDIDATES_MAX]:
            found = line.find(" " + " ".join(gram) + " ") if gram not in known else -1
            if found >= 0:
                known.add(gram)
                grams.append((token_at[found + 1], gram))
        grams.sort(key=lambda ig: (-len(ig[1]), ig[0]))
    return grams[:PHRASE_CANDIDATES_MAX]


def without_absent(grams: list[tuple[int, Gram]], dfs: dict[str, int]) -> list[tuple[int, Gram]]:
    """The candidates without those holding a word no chunk holds (its document frequency
    0): no chunk can hold the phrase, so its probe could only answer none
    (docs/decisions/0048-lexical-stage-cost.md)."""
    absent = {t for t, df in dfs.items() if df == 0}
    return [(i, g) for i, g in grams if absent.isdisjoint(g)] if absent else grams


def found(grams: list[tuple[int, Gram]], held: dict[Gram, list[str]]) -> list[tuple[Gram, list[str]]]:
    """Longest first, the candidates the collection holds rarely (1 to
    PHRASE_MAX_CHUNKS chunks); a gram inside a span already found is passed over."""
    out: list[tuple[Gram, list[str]]] = []
    covered: set[int] = set()
    for i, gram in grams:
        span = set(range(i, i + len(gram)))
        if span <= covered:
            continue
        ids = held[gram]
        if 1 <= len(ids) <= PHRASE_MAX_CHUNKS:
            out.append((gram, ids))
            covered |= span
    return out
