"""A question's content: what the refusal gate measures evidence on.

Slack questions come wrapped: "hey all, quick q", "anyone know", "just got married!!",
"ugh", "lol", "thanks!!", `:tada:`. Those words are in the question's word weight, and no
passage holds them, so a chatty question seems less covered than the same question asked
plainly. `focus` sets them aside and keeps the rest as written:

- emoji shortcodes (`:smile:`) and pictographs;
- filler words anywhere (FILLER: greetings, thanks, "lol", "ugh", "quick q", "pls");
  "know" only after "anyone"/"someone"/"you" ("anyone know", "do you know");
- a whole exclamation ("just got married!!", "so excited!") when another sentence of the
  message asks the question and keeps content words of its own (PREAMBLE_MIN_WORDS).

Nothing else is touched, and a focus that would leave no content word is no focus: the
question is measured as written. Only the first FOCUS_MAX_CHARS characters are read (a
question longer than that is measured as written); every pattern here is linear in its
input (tests/test_linear_patterns.py). The decision record is
docs/decisions/0033-three-outcome-gate.md.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from search.text import STOPWORDS, words

# Real questions run to a few hundred characters; a Slack message may hold 40,000, and
# its content is then not a matter of a greeting (docs/decisions/0033-three-outcome-gate.md).
FOCUS_MAX_CHARS = 2_000
# An exclamation is set aside only when the question left holds at least this many
# content words: "laptop stolen! what now?" keeps its exclamation, which is the question.
PREAMBLE_MIN_WORDS = 2

# Words that carry no topic in a workplace question: greetings, thanks, interjections,
# hedges and Slack shorthand. Words a handbook may be about ("help", "team", "question"
# alone) are not here.
FILLER = frozenset(
    """hey hi hello hiya howdy yo folks everyone everybody yall guys peeps friends gang thanks thank thx ty tysm tia cheers appreciated appreciate
    lol lmao rofl haha hahaha heh hehe ugh argh ooh ohh oh omg wow yay woo whoa hmm hmmm
    um umm uh erm meh ok okay k kk cool sweet awesome great please pls plz sorry apologies
    btw fyi iirc afaik imo imho tbh idk quick q qq random dumb silly stupid newbie noob
    anyone anybody someone somebody wondering curious folks probably basically actually
    really just super literally""".split()
)
# "know" is filler after these ("anyone know", "does anybody know", "do you know").
_KNOW_AFTER = frozenset({"anyone", "anybody", "someone", "somebody", "you", "u", "ya"})
# :shortcode: as Slack writes emoji (bounded, no nested repetition: linear).
_SHORTCODE = re.compile(r":[a-z0-9_+'-]{1,40}:", re.IGNORECASE)
# Sentence ends: a run of . ! ? or a newline, kept with the sentence before it.
_SENTENCE = re.compile(r"[^.!?\n]*[.!?\n]*")
_ASKING = frozenset(
    """what when where which who whom whose why how can could do does did is are am was were
    will would should shall may might must has have any""".split()
)


@dataclass(frozen=True)
class Focus:
    """The question's content: its content words (`terms`, in order, no repeats), the
    words it keeps as text (`text`, stopwords included), and what was set aside."""

    terms: list[str]
    text: str
    set_aside: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.set_aside)


def _pictograph(ch: str) -> bool:
    return unicodedata.category(ch) == "So" or 0x1F000 <= ord(ch) <= 0x1FAFF


def _content(sentence: str) -> list[str]:
    """The content words of a sentence once filler is set aside."""
    out: list[str] = []
    prev = ""
    for w in words(sentence):
        if not (w in STOPWORDS or w in FILLER or (w == "know" and prev in _KNOW_AFTER)):
            out.append(w)
        prev = w
    return out


def _asks(sentence: str) -> bool:
    """Question-shaped: ends in "?", or it or a clause of it (after a comma) opens with a
    question word ("my friend is interviewing with us, can i refer them")."""
    if sentence.rstrip().endswith("?"):
        return True
    return any(ws and ws[0] in _ASKING for ws in map(words, sentence.split(",")))


def as_written(question: str) -> Focus:
    return Focus(list(dict.fromkeys(w for w in words(question) if w not in STOPWORDS)), question)


def focus(question: str) -> Focus:
    """The question with its preamble, greetings, sentiment and filler set aside."""
    if len(question) > FOCUS_MAX_CHARS:
        return as_written(question)
    aside: list[str] = []
    aside.extend(m.group(0) for m in _SHORTCODE.finditer(question))
    text = _SHORTCODE.sub(" ", question)
    if any(_pictograph(ch) for ch in text):
        aside.extend(ch for ch in text if _pictograph(ch))
        text = "".join(" " if _pictograph(ch) else ch for ch in text)
    sentences = [s for s in _SENTENCE.findall(text) if s.strip()]
    asks = [_asks(s) for s in sentences]
    asking = any(a and len(_content(s)) >= PREAMBLE_MIN_WORDS for s, a in zip(sentences, asks))
    kept: list[str] = []
    for s, a in zip(sentences, asks):
        if asking and not a and s.rstrip().endswith("!"):
            aside.append(s.strip())
            continue
        kept.append(s)
    content: dict[str, None] = {}
    for s in kept:
        content.update(dict.fromkeys(_content(s)))
    if not content:
        return as_written(question)
    kept_words: list[str] = []
    for s in kept:
        prev = ""
        for w in words(s):
            if w in FILLER or (w == "know" and prev in _KNOW_AFTER):
                if w not in STOPWORDS:  # "all", "just": no weight either way
                    aside.append(w)
            else:
                kept_words.append(w)
            prev = w
    return Focus(list(content), " ".join(kept_words), aside)
