"""Condensing a follow-up into a standalone question, without a model.

The Claude composer condenses with the model when it can and falls back to this.
"""

from __future__ import annotations

import re

from bot.memory.state import PriorTurn
from search.text import content_words

# Follow-up markers: a question that leans on the thread for its subject.
_FOLLOW_UP = re.compile(
    r"^(and|but|also|so|what about|how about|then|why|same)\b|\b(it|its|they|them|their|that|"
    r"this|those|these|he|she|his|her|there|one)\b",
    re.IGNORECASE,
)
# A question of at most this many content words is too thin to stand alone in a thread.
FOLLOW_UP_MAX_WORDS = 4


def condense(question: str, history: list[PriorTurn]) -> str:
    """A standalone question: a follow-up borrows the subject words of the thread."""
    if not history:
        return question
    own = content_words(question)
    if len(own) > FOLLOW_UP_MAX_WORDS and not _FOLLOW_UP.search(question):
        return question
    borrowed = [w for w in content_words(history[-1].condensed) if w not in own]
    if not borrowed:
        return question
    return f"{question} ({' '.join(borrowed)})"
