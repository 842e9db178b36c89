"""The `vocab_neighbours` probe of benchmarks/fusion_probe.py: each content word of the
question expanded with the collection's own words whose vectors lie near its vector
(docs/decisions/0056-vocabulary-neighbours.md).

The vocabulary is the store's indexed words that are alphabetic, of VOCAB_MIN_LETTERS
letters or more and in VOCAB_MIN_CHUNKS chunks or more; each is embedded alone by the
encoder (one short text, as a question is), once per collection, in batches, and the
vectors cached beside the store as `<store>.vocab-<key>.npz`, the key a hash of the model
stamp and the vocabulary itself (the two things the vectors depend on).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from search.text import STOPWORDS, content_words, stem

# Words shorter than this or held by fewer chunks are left out of the vocabulary: a two-letter
# token or a word of one chunk is mostly a code, a name or a typo, not a synonym to search for.
VOCAB_MIN_LETTERS = 3
VOCAB_MIN_CHUNKS = 2
ENCODE_BATCH = 512  # words per encoder call when the vocabulary is embedded


def collection_vocabulary(store) -> list[str]:
    """The store's words eligible as neighbours, sorted (chunks_vocab counts chunks a term is in)."""
    rows = store._db.execute("SELECT term, doc FROM chunks_vocab").fetchall()
    return sorted(
        t
        for t, d in rows
        if d >= VOCAB_MIN_CHUNKS and len(t) >= VOCAB_MIN_LETTERS and t.isalpha() and t not in STOPWORDS
    )


def expandable(question: str) -> list[str]:
    """The question's content words that are expanded: alphabetic, VOCAB_MIN_LETTERS or longer."""
    return [w for w in content_words(question) if len(w) >= VOCAB_MIN_LETTERS and w.isalpha()]


class VocabNeighbours:
    """A collection's vocabulary with its vectors, and the near words of a question's words."""

    def __init__(self, store, embedder, cache: Path | None = None) -> None:
        self.embedder = embedder
        self.words = collection_vocabulary(store)
        self.stems = [stem(w) for w in self.words]
        key = hashlib.sha256((embedder.stamp.describe() + "\n" + "\n".join(self.words)).encode()).hexdigest()[:12]
        path = cache.with_name(f"{cache.name}.vocab-{key}.npz") if cache is not None else None
        self.cached = bool(path and path.exists())
        t = time.perf_counter()
        if path is not None and self.cached:
            self.vectors = np.load(path)["vectors"]
        else:
            parts = [
                embedder.encode_texts(self.words[i : i + ENCODE_BATCH]) for i in range(0, len(self.words), ENCODE_BATCH)
            ]
            empty = np.zeros((0, embedder.stamp.dims), np.float32)
            self.vectors = np.concatenate(parts).astype(np.float32) if parts else empty
            if path is not None:
                np.savez(path, vectors=self.vectors)
        self.seconds = time.perf_counter() - t
        self._word_vectors: dict[str, np.ndarray] = {}
        self.encode_ms: list[float] = []  # one batched encoder call per question, first time asked

    def word_vectors(self, ws: list[str]) -> np.ndarray:
        """The vectors of words each embedded alone, in one batched call for the unseen ones."""
        new = [w for w in dict.fromkeys(ws) if w not in self._word_vectors]
        if new:
            t = time.perf_counter()
            vs = self.embedder.encode_texts(new)
            self.encode_ms.append((time.perf_counter() - t) * 1000)
            self._word_vectors.update(zip(new, vs, strict=True))
        return np.stack([self._word_vectors[w] for w in ws]) if ws else np.zeros((0, self.vectors.shape[1]), np.float32)

    def near(
        self, question: str, n: int, tau: float, only: set[str] | None = None
    ) -> dict[str, list[tuple[str, float]]]:
        """Per expandable word of the question (of those in `only`, when given), up to n
        vocabulary words of cosine >= tau to it, nearest first: not the word, nor one sharing
        its stem, nor a content word of the question."""
        ws = [w for w in expandable(question) if only is None or w in only]
        if not ws or not self.words:
            return {}
        asked = set(content_words(question))
        sims = self.word_vectors(ws) @ self.vectors.T
        out: dict[str, list[tuple[str, float]]] = {}
        for w, row in zip(ws, sims, strict=True):
            own = stem(w)
            found: list[tuple[str, float]] = []
            for i in np.argsort(-row, kind="stable"):
                if row[i] < tau or len(found) >= n:
                    break
                if self.words[i] in asked or self.stems[i] == own:
                    continue
                found.append((self.words[i], float(row[i])))
            out[w] = found
        return out

    def near_vector(self, vector: np.ndarray, question: str, n: int, tau: float) -> list[tuple[str, float]]:
        """Up to n vocabulary words of cosine >= tau to the whole question's vector, nearest
        first, none a content word of the question or sharing a stem with one."""
        asked = set(content_words(question))
        own = {stem(w) for w in asked}
        row = self.vectors @ vector.astype(np.float32)
        found: list[tuple[str, float]] = []
        for i in np.argsort(-row, kind="stable"):
            if row[i] < tau or len(found) >= n:
                break
            if self.words[i] not in asked and self.stems[i] not in own:
                found.append((self.words[i], float(row[i])))
        return found

    def terms(self, question: str, n: int, tau: float, only: set[str] | None = None) -> list[str]:
        """The neighbours of the question's words, one group's terms, without repeats."""
        return list(dict.fromkeys(t for found in self.near(question, n, tau, only).values() for t, _ in found))
