"""Answer-type cues for the extractive composer: what kind of thing a question asks for (a
number, a name, a time, a place, a command) and whether a sentence holds one.

`cues` are the tests whose match adds CUE_WEIGHT to a sentence's score. `answer_cues` are
the where/when/who tests read on the sentence with the question's own words masked: "The
fire alarm at the Annex is a continuous bell" names a place only by the question's own
"Annex", so for "Where do people gather at the Annex if the alarm goes off?" it holds no
answer, and the composer looks past it (compose.py CUE_LOOKAHEAD;
docs/decisions/0031-sentence-choice-inner-quotes.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from search.text import STOPWORDS, W_CLASS, words

Test = Callable[[str], bool]

_NUMBER_Q = re.compile(
    r"\b(how (many|much|long|big|large|often|fast|old|soon)|max(imum)?|min(imum)?|limit|size|"
    r"number of|percent(age)?|what time|how far|timeout|threshold|default)\b",
    re.IGNORECASE,
)
_WHO_Q = re.compile(r"\bwho(m|se)?\b", re.IGNORECASE)
_WHEN_Q = re.compile(r"\b(when|what (day|date|time)|which day|deadline)\b", re.IGNORECASE)
_WHERE_Q = re.compile(r"\b(where|(what|which) (place|room|floor|building|location|site))\b", re.IGNORECASE)
_COMMAND_Q = re.compile(
    r"\b(command|how (do|can|should|would) (i|we|you)|how to|syntax|flag|"
    r"option|cli|run|invoke|type)\b",
    re.IGNORECASE,
)
_HAS_NUMBER = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|twelve|every|second|third|"
    r"hundred|thousand|million|billion|once|twice|daily|weekly|monthly|"
    r"hourly)\b",
    re.IGNORECASE,
)
_HAS_TIME = re.compile(
    r"\d|\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"january|february|march|april|may|june|july|august|september|october|"
    r"november|december|morning|evening|night|week|day|month|year|before|"
    r"after|until)\b",
    re.IGNORECASE,
)
# A place: a spatial preposition or a word for a place, or "by/at/in/on" before a name or
# a number ("by Dock 7", "in B12"); not "by pressing" or "at the end of the week".
_HAS_PLACE = re.compile(
    r"(?i:\b(next to|beside|behind|opposite|in front of|near|outside|inside|upstairs|"
    r"downstairs|(north|south|east|west)(ern)? (side|end|wing)|(ground|first|second|third|top) "
    r"floor|basement|room|building|dock|gate|entrance|reception|lobby|corridor|car park|"
    r"point|yard|hall|desk|cabinet|shelf|drawer|directory|folder)\b)"
    r"|\b(?:by|at|in|on) (?:the )?[A-Z0-9]"
)
CODE = re.compile(r"`|\$ |--?[a-z][\w-]*|\w\(|\b[a-z]+_[a-z_]+\b|^\s*[a-z][\w.-]* [a-z-]+|[=<>|]{1,2}")
_NAME = re.compile(r"(?<=[a-z,;] )[A-Z][a-z]+(?: [A-Z][a-z]+)+")
# A word with the marks it holds (search.marks): a question's "छुट्टी" is masked whole.
_WORD = re.compile(W_CLASS + "+")


def cues(question: str) -> list[Test]:
    """The tests a sentence that answers this question is likely to meet (a score cue)."""
    out: list[Test] = []
    if _NUMBER_Q.search(question):
        out.append(lambda s: bool(_HAS_NUMBER.search(s)))
    if _WHO_Q.search(question):
        out.append(lambda s: bool(_NAME.search(s)))
    if _WHEN_Q.search(question):
        out.append(lambda s: bool(_HAS_TIME.search(s)))
    if _COMMAND_Q.search(question):
        out.append(lambda s: bool(CODE.search(s)))
    return out


def answer_cues(question: str) -> list[Test]:
    """For a where, when or who question: the tests of a sentence that gives the place, the
    time or the person, read with the question's own words masked (naming the question's
    subject is no answer). Empty for other questions."""
    own = {w for w in words(question) if w not in STOPWORDS}

    def masked(sentence: str) -> str:
        return _WORD.sub(lambda m: "_" if m.group(0).lower() in own else m.group(0), sentence)

    out: list[Test] = []
    if _WHERE_Q.search(question):
        out.append(lambda s: bool(_HAS_PLACE.search(masked(s))))
    if _WHEN_Q.search(question):
        out.append(lambda s: bool(_HAS_TIME.search(masked(s))))
    if _WHO_Q.search(question):
        out.append(lambda s: bool(_NAME.search(masked(s))))
    return out
