"""Word tokens for the lexical arm, matching SQLite FTS5's unicode61 tokenizer as citebot
configures it (TOKENIZE).

unicode61 (remove_diacritics 2) lower-cases, strips Latin diacritics and splits on anything
that is not a word character; query terms must be cut the same way or a term the index
holds is never asked for. The Elasticsearch store indexes these same tokens (a
whitespace-analysed field filled by words()), because Elasticsearch's standard
analyzer cut 186 of the 367 sample chunks differently ("customer’s", "1.6").

ASCII text is cut by a regular expression (lower case, runs of letters and digits). Any
other character is cut as unicode61 cuts it, which SQLite is asked once per character
(`_known`, `_ask`): Python's own folding differs outside Latin script (NFD made "новый" "новыи"
and "άλφα" "αλφα"), and the embedded store's index would never hold the word asked for.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from functools import lru_cache

import snowballstemmer

from search.marks import IN_WORD_CLASS, IN_WORD_RANGES, IN_WORD_SET, MARKS

_WORD = re.compile(r"[^\W_]+")
# A word character as unicode61 reads one, for the patterns that find words in the
# question's own text: a letter or a digit, or a mark a word holds (search.marks), which
# Python's \w leaves out ("छुट्टी" was "छ", "ट", "ट" to [^\W_]+, a decomposed "Mu\u0308ller"
# "Mu" and "ller"). ASCII text holds no such mark: it reads as before.
WORD_CHAR = rf"(?:[^\W_]|{IN_WORD_CLASS})"
# A whole word of the question's text (name_like), never cut at a mark.
_TEXT_WORD = re.compile(WORD_CHAR + "++")
# \w (the underscore too) or a mark a word holds: the character of the word runs the
# answer's cues, the evaluation's label overlap and Slack's code-block identifiers read.
W_CLASS = rf"[\w{IN_WORD_RANGES}]"

# unicode61's options for every FTS5 table and for the questions' cut. The combining marks
# of the scripts that write vowels and signs as marks (search.marks: Devanagari, Bengali,
# Tamil, Thai, Arabic, Hebrew ...) are word characters beside unicode61's letters, digits and
# private use, so a vowel sign or a virama stays inside its word ("हिन्दी" one token, where
# the default made "ह" and "द" of it). The script-neutral combining marks are as unicode61
# leaves them: Latin diacritics dropped, the rest separators, variation selectors too.
# Listed as `tokenchars`, not as the category M: that made a lone dropped diacritic an
# empty token (docs/decisions/0061-combining-marks-inside-words.md).
TOKENIZE = f"unicode61 remove_diacritics 2 tokenchars '{MARKS}'"

# A short English stopword list: words that carry no address on their own. Phrases
# made only of these ("as and when it is") are found by the phrase rule instead.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could did do does doing don't down
    during each few for from further had has have having he her here hers herself him himself
    his how i if in into is isn't it it's its itself just let me more most my myself no nor not
    now of off on once only or other ought our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours yourself yourselves s t d ll m re ve""".split()
)


# What unicode61 makes of each character met so far: its folded form ("" for a diacritic it
# drops); `_CUT` maps a separator to a blank as well, `_FOLD` leaves separators out (as
# they are). ASCII is known from the start: letters lower-cased, digits kept, the rest
# separators (tests/test_retrieval.py checks all 128 against SQLite).
_CUT: dict[int, str] = {i: chr(i).lower() if chr(i).isalnum() else " " for i in range(128)}
_FOLD: dict[int, str] = {i: c for i, c in _CUT.items() if c != " "}
_LEARN_LOCK = threading.Lock()
_scratch: sqlite3.Connection | None = None
# Characters asked of SQLite in one statement, the lock given up between batches: a text
# of every code point took 10 s and 756 MB in one.
LEARN_BATCH = 4096
# Characters kept beyond ASCII; past it, new ones are asked for each text and not kept
# (real text holds a few thousand; a hostile message could hold a million).
LEARN_KEEP = 1 << 16


class _Layered:
    """A translation table of the characters asked for one text over the kept ones."""

    def __init__(self, asked: dict[int, str], kept: dict[int, str]) -> None:
        self.asked, self.kept = asked, kept

    def __getitem__(self, code: int) -> str:
        found = self.asked.get(code)
        return self.kept[code] if found is None else found


def _ask(chars: list[str]) -> dict[int, str]:
    """How unicode61 cuts each character: "q<c>q" as one token is a word character (folded
    to what stands between the q's, "" for a dropped diacritic), as two a separator (" ")."""
    global _scratch
    if _scratch is None:
        _scratch = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        _scratch.execute(f'CREATE VIRTUAL TABLE t USING fts5(x, tokenize = "{TOKENIZE}")')
        _scratch.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    asked = [c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF]  # a lone surrogate has no UTF-8: a separator
    _scratch.execute("BEGIN")
    try:
        _scratch.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", [(i, f"q{c}q") for i, c in enumerate(asked)])
        cut: dict[int, list[str]] = {}
        for doc, term in _scratch.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
            cut.setdefault(doc, []).append(term)
    finally:
        _scratch.execute("ROLLBACK")
    learnt = {ord(c): " " for c in chars}
    for i, c in enumerate(asked):
        tokens = cut.get(i, [])
        if len(tokens) == 1 and len(tokens[0]) >= 2 and tokens[0][0] == tokens[0][-1] == "q":
            learnt[ord(c)] = tokens[0][1:-1]
    return learnt


def _known(text: str) -> dict[int, str]:
    """Make sure every character of the text is known: kept in _CUT/_FOLD, or (past
    LEARN_KEEP) returned for this text alone."""
    new = sorted(c for c in set(text) if ord(c) not in _CUT)
    once: dict[int, str] = {}
    for at in range(0, len(new), LEARN_BATCH):
        with _LEARN_LOCK:
            batch = [c for c in new[at : at + LEARN_BATCH] if ord(c) not in _CUT]
            if not batch:
                continue
            learnt = _ask(batch)
            if len(_CUT) + len(learnt) > 128 + LEARN_KEEP:
                once.update(learnt)
                continue
            # _FOLD first: a reader takes a character in _CUT as known.
            _FOLD.update((k, v) for k, v in learnt.items() if v != " ")
            _CUT.update(learnt)
    return once


def _forget_scratch() -> None:
    """A forked child never uses its parent's SQLite connection, or a lock held at the fork."""
    global _scratch, _LEARN_LOCK
    _scratch, _LEARN_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_scratch)


def fold(text: str) -> str:
    """Lower-case and strip diacritics as unicode61 does, each word character folded and
    every other character left as it is (ASCII: lower() alone)."""
    if text.isascii():
        return text.lower()
    once = _known(text)
    if once:
        return text.translate(_Layered({k: v for k, v in once.items() if v != " "}, _FOLD))
    return text.translate(_FOLD)


def words(text: str) -> list[str]:
    """Every token of the text, folded, in order (stopwords included): unicode61's tokens."""
    if text.isascii():
        return _WORD.findall(text.lower())
    once = _known(text)
    return text.translate(_Layered(once, _CUT) if once else _CUT).split()


_STEMMER = snowballstemmer.stemmer("english")
_STEMMER_LOCK = threading.Lock()  # a stemmer object keeps the word it works on


@lru_cache(maxsize=65536)
def stem(token: str) -> str:
    """The Snowball (Porter 2) English stem of one folded token ("configuring",
    "configuration" -> "configur"); a token holding a digit is kept whole ("e417")."""
    if any(c.isdigit() for c in token):
        return token
    with _STEMMER_LOCK:
        return _STEMMER.stemWord(token)


def stems(text: str) -> list[str]:
    """The stem of every token of the text, in order: what the stemmed lexical fields hold."""
    return [stem(w) for w in words(text)]


def query_stems(term: str) -> list[str]:
    """The stems a stemmed term group searches for one query term: the stem of each of
    its tokens, in order (several tokens are a phrase). A one-token term whose stem is a
    stopword searches nothing ("whats" -> "what"): the stopword list holds for stems too."""
    out = stems(term)
    if len(out) == 1 and out[0] in STOPWORDS:
        return []
    return out


def letters_only(token: str) -> bool:
    """Whether a token is letters only, the marks a word holds counted with its letters:
    str.isalpha() refuses "छुट्टी" and "ไม่", whose vowel signs and tone marks are marks."""
    if token.isalpha() or token.isascii():
        return token.isalpha()
    return any(c.isalpha() for c in token) and all(c.isalpha() or c in IN_WORD_SET for c in token)


def content_words(text: str) -> list[str]:
    """Tokens that are not stopwords, in order, without repeats."""
    seen: dict[str, None] = {}
    for w in words(text):
        if w not in STOPWORDS:
            seen.setdefault(w, None)
    return list(seen)


# Sentence punctuation and a blank after it: two fixed characters, searched in the run of
# non-word characters before a token only (`(^|[.!?:;]\s+|\n)\W*$` searched over the
# whole text before each token was quadratic in the question's length).
_SENTENCE_END = re.compile(r"[.!?:;]\s")


def _starts_sentence(text: str, start: int) -> bool:
    """Whether the token at `start` opens the text, a line or a sentence: the run of
    non-word characters before it is the whole prefix, holds a newline, or holds
    sentence punctuation followed by a blank."""
    gap = start
    while gap > 0 and not (text[gap - 1].isalnum() or text[gap - 1] == "_" or text[gap - 1] in IN_WORD_SET):
        gap -= 1
    between = text[gap:start]
    return gap == 0 or "\n" in between or _SENTENCE_END.search(between) is not None


def name_like(text: str) -> set[str]:
    """Folded tokens the writer marked as names: Capitalised inside a sentence, ALL-CAPS,
    mixedCase or holding a digit ("Oskar Brandvold", "E-417", "BSS", "worktreeConfig"). A
    rare word is an address only when it is a name; a rare ordinary word ("reimbursed") is
    one vote among many."""
    out: set[str] = set()
    for m in _TEXT_WORD.finditer(text):
        tok = m.group(0)
        folded = fold(tok)  # len(folded): a dropped diacritic is no letter ("A\u0301" is one)
        if folded and (
            any(c.isdigit() for c in tok)
            or (any(c.isupper() for c in tok[1:]) and any(c.islower() for c in tok))
            or (tok[0].isupper() and (tok.isupper() and len(folded) > 1 or not _starts_sentence(text, m.start())))
        ):
            out.add(folded)
    return out


# Words the writer joined without a space: "extensions.worktreeConfig", "analysis_limit",
# "experimental-mode", "std::fs", "src/main.rs". Searched as phrases of their tokens.
# Tried only where a word starts (the lookbehind) and its first word never given back
# (possessive): searched from every position inside a long word with no joiner, the plain
# pattern was quadratic in that word (20,000 letters: 27 s). A mark is a word character
# (WORD_CHAR): "छुट्टी-नीति" is its two whole words, never a match from the middle of one.
_JOINED = re.compile(rf"(?<![^\W_])(?<!{IN_WORD_CLASS}){WORD_CHAR}++(?:(?:[._/-]|::)+{WORD_CHAR}+)+")


def joined_terms(text: str) -> list[tuple[str, ...]]:
    """The token sequences of the words the writer joined by . _ - / or :: (identifiers,
    options, paths), in order, without repeats; one with no token of two characters or
    more that is not a stopword ("e.g.", "i.e.", "1.6") is left out."""
    out: dict[tuple[str, ...], None] = {}
    for m in _JOINED.finditer(text):
        toks = tuple(words(m.group(0)))
        if len(toks) >= 2 and any(len(t) >= 2 and t not in STOPWORDS for t in toks):
            out.setdefault(toks, None)
    return list(out)


# Quotation marks a writer puts around words they copy: straight, curly and the backtick
# (Slack's inline code). Each opener with the closers that end it.
_QUOTES = {"'": "'’", "‘": "'’", '"': '"”', "“": '"”', "`": "`"}
# A quotation longer than this is not a term a person copied but a passage; its phrases
# are the ordinary candidates'.
QUOTED_MAX_CHARS = 200


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch in IN_WORD_SET


def quoted_terms(text: str, nested: bool = True) -> list[tuple[str, ...]]:
    """The token sequences the writer put in quotation marks ('golden handcuffs', "Use or
    Lose", `git bisect`), in order, without repeats. An opener follows no word character
    and a closer is followed by none, so the apostrophes of "what's" and "teams'" open
    nothing, and one between two word characters ("don't") is inside the quotation. A
    quotation is at most QUOTED_MAX_CHARS characters on one line; an empty one ('', "")
    holds no words and ends where its closer stands. The quotations inside a quotation
    ("they call it 'soft exit'") are read too, one level deep. Linear in the text: one
    pass from the end finds each position's next closer of each kind and next line end."""
    if not any(mark in text for mark in _QUOTES):  # most questions: no pass at all
        return []
    n = len(text)
    kinds = sorted(set(_QUOTES.values()))
    following: dict[str, list[int]] = {k: [n] * (n + 1) for k in kinds}
    line_end = [n] * (n + 1)
    for j in range(n - 1, -1, -1):
        ch = text[j]
        line_end[j] = j if ch == "\n" else line_end[j + 1]
        closes = not (j + 1 < n and _word_char(text[j + 1]))
        for k in kinds:
            following[k][j] = j if closes and ch in k else following[k][j + 1]
    out: dict[tuple[str, ...], None] = {}
    i = 0
    while i < n:
        kind = _QUOTES.get(text[i])
        if kind is None or (i > 0 and _word_char(text[i - 1])):
            i += 1
            continue
        # The closer may stand right after the opener: the quotation is empty, and the
        # words after it are no part of it.
        end = following[kind][i + 1]
        if end >= n or end > i + 1 + QUOTED_MAX_CHARS or line_end[i + 1] < end:
            i += 1
            continue
        quoted = text[i + 1 : end]
        toks = tuple(words(quoted))
        if toks:
            out.setdefault(toks, None)
            for inner in quoted_terms(quoted, nested=False) if nested else ():
                out.setdefault(inner, None)
        i = end + 1
    return list(out)
