"""Word tokens for the lexical arm, matching SQLite FTS5's unicode61 tokenizer.

unicode61 (remove_diacritics 2) lower-cases, strips diacritics and splits on anything
that is not a letter or a digit; query terms must be cut the same way or a term the
index holds is never asked for. The Elasticsearch store indexes these same tokens (a
whitespace-analysed field filled by words()), because Elasticsearch's standard
analyzer cut 186 of the 367 sample chunks differently ("customer’s", "1.6").
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache

import snowballstemmer

_WORD = re.compile(r"[^\W_]+")

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


def fold(text: str) -> str:
    """Lower-case and strip diacritics, as unicode61 does: canonical decomposition only
    (NFKD would turn "x²" into "x2" and "ⅸ" into "ix") and lower() not casefold()
    ("ß" stays "ß"; casefold made "Fußballer" unfindable)."""
    lowered = text.lower()
    if lowered.isascii():  # nothing to decompose or strip: most text, at a fraction of the cost
        return lowered
    decomposed = unicodedata.normalize("NFD", lowered)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def words(text: str) -> list[str]:
    """Every token of the text, folded, in order (stopwords included)."""
    return _WORD.findall(fold(text))


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
    while gap > 0 and not (text[gap - 1].isalnum() or text[gap - 1] == "_"):
        gap -= 1
    between = text[gap:start]
    return gap == 0 or "\n" in between or _SENTENCE_END.search(between) is not None


def name_like(text: str) -> set[str]:
    """Folded tokens the writer marked as names: Capitalised inside a sentence, ALL-CAPS,
    mixedCase or holding a digit ("Oskar Brandvold", "E-417", "BSS", "worktreeConfig"). A
    rare word is an address only when it is a name; a rare ordinary word ("reimbursed") is
    one vote among many."""
    out: set[str] = set()
    for m in _WORD.finditer(text):
        tok = m.group(0)
        if (
            any(c.isdigit() for c in tok)
            or (any(c.isupper() for c in tok[1:]) and any(c.islower() for c in tok))
            or (tok[0].isupper() and (tok.isupper() and len(tok) > 1 or not _starts_sentence(text, m.start())))
        ):
            out.add(fold(tok))
    return out


# Words the writer joined without a space: "extensions.worktreeConfig", "analysis_limit",
# "experimental-mode", "std::fs", "src/main.rs". Searched as phrases of their tokens.
# Tried only where a word starts (the lookbehind) and its first word never given back
# (possessive): searched from every position inside a long word with no joiner, the plain
# pattern was quadratic in that word (20,000 letters: 27 s).
_JOINED = re.compile(r"(?<![^\W_])[^\W_]++(?:(?:[._/-]|::)+[^\W_]+)+")


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
