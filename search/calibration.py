"""Per-collection calibration of the refusal gate: what "nothing close" means here.

Raw cosine similarity means different things in different collections (a manual full of
one product's vocabulary sits closer to every question than a mixed handbook). So the
gate does not compare a question's best similarity with a fixed number but with the
collection's own null distribution: the best similarity that pseudo-questions made of the
collection's own words, drawn from two unrelated chunks, reach. Such a question uses only
words the collection holds and asks about nothing it answers, like a near miss; an
answerable question usually sits above their mean. Computed once after each ingest that
changes the collection (NULL_QUESTIONS encodes, about a second on two CPU cores) and
stored with the index; a store without it (an older ingest) is calibrated on first use
and the result kept in memory.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from search.store import Store
from search.text import content_words, letters_only

STAT_KEY = "gate_null"
CALIBRATION_VERSION = 1
# Pseudo-questions per collection. 64 gave a mean within +-0.01 of 256's on the sample
# collection, git and haproxy (null mean 0.38-0.40, std 0.08-0.11).
NULL_QUESTIONS = 64
# Each pseudo-question: this many content words from each of two random chunks.
WORDS_PER_CHUNK = 2
# Words shorter than this are too often codes or fragments to stand for a topic.
MIN_WORD_LETTERS = 4
SEED = 20261201  # fixed: the same collection gives the same calibration on every machine


@dataclass(frozen=True)
class NullDistribution:
    """Best dense similarity of pseudo-questions: mean, spread and how many were drawn."""

    mean: float
    std: float
    n: int
    version: int = CALIBRATION_VERSION

    def z(self, similarity: float) -> float:
        """How many spreads above the null mean a similarity stands."""
        return (similarity - self.mean) / (self.std or 1.0)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict | None) -> NullDistribution | None:
        if not raw or raw.get("version") != CALIBRATION_VERSION:
            return None
        return cls(float(raw["mean"]), float(raw["std"]), int(raw["n"]))


def pseudo_questions(chunk_texts: Sequence[str], n: int = NULL_QUESTIONS, seed: int = SEED) -> list[str]:
    """Questions of the collection's own words about nothing in particular."""
    pools = [
        ws
        for ws in ([w for w in content_words(t) if letters_only(w) and len(w) >= MIN_WORD_LETTERS] for t in chunk_texts)
        if len(ws) >= WORDS_PER_CHUNK
    ]
    if len(pools) < 2:
        return []
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.sample(range(len(pools)), 2)
        out.append(" ".join(rng.sample(pools[a], WORDS_PER_CHUNK) + rng.sample(pools[b], WORDS_PER_CHUNK)))
    return out


def measure(store: Store, encode_texts: Callable[[Sequence[str]], np.ndarray]) -> NullDistribution | None:
    """The collection's null distribution, or None for a collection too small to have one."""
    chunks = sorted(store.iter_chunks(), key=lambda c: c.chunk_id)
    questions = pseudo_questions([c.text for c in chunks])
    if not questions:
        return None
    vectors = encode_texts(questions)
    best = np.array([max((s for _, s in store.dense(v, 1)), default=0.0) for v in vectors])
    return NullDistribution(round(float(best.mean()), 4), round(float(best.std()), 4), len(questions))


def calibrate(store: Store, encode_texts: Callable[[Sequence[str]], np.ndarray]) -> NullDistribution | None:
    """Measure and store the calibration (after an ingest)."""
    null = measure(store, encode_texts)
    store.write_stat(STAT_KEY, null.as_dict() if null else {})
    return null


def stored(store: Store) -> NullDistribution | None:
    return NullDistribution.from_dict(store.read_stat(STAT_KEY))
