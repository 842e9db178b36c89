"""A small deterministic embedder for tests that do not measure retrieval.

It has the Embedder's surface (stamp, count_tokens, plan, encode_jobs, embed_chunks,
encode_texts, encode_each, encode_query) but no model: a text's vector is its content words hashed into DIMS
buckets (feature hashing), normalised. Texts sharing words are close, which is all a test
of the Slack adapter or the turn pipeline needs; loading MiniLM takes seconds and a few
hundred MB per test process. Its stamp is its own, so a store built with it refuses the
real model and the other way round.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from ingest.embedder import WindowJob, WindowSpan
from search.text import content_words
from search.types import Chunk, ModelStamp, Window

DIMS = 128
# Tokens: words and single punctuation marks, roughly what a WordPiece tokenizer counts for
# English prose, so the chunker cuts chunks of about the usual size.
_TOKEN = re.compile(r"\w+|[^\w\s]")
# Windows of at most this many tokens, as the real model's 256-token window minus specials.
WINDOW_TOKENS = 254


class HashingEmbedder:
    """Deterministic bag-of-words vectors; the same text gives the same vector everywhere."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims
        self.max_tokens = WINDOW_TOKENS
        self.stamp = ModelStamp(name="citebot-test-hashing", dims=dims, checksum="hashing-v1", runtime="hashing")

    def count_tokens(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dims, np.float32)
        for word in content_words(text):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
            v[h % self.dims] += 1.0 if (h >> 32) & 1 else -1.0
        norm = float(np.linalg.norm(v))
        if norm == 0.0:
            v[0] = 1.0
            return v
        return v / norm

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), np.float32)
        return np.stack([self._vector(t) for t in texts])

    def encode_each(self, texts: Sequence[str]) -> np.ndarray:
        """What the extractive composer calls (Embedder.encode_each); nothing here is padded."""
        return self.encode_texts(texts)

    def encode_query(self, text: str) -> np.ndarray:
        return self._vector(text)

    def plan(self, chunks: Sequence[Chunk]) -> list[WindowJob]:
        """The windows of embed_chunks, not yet embedded (the text stands in for token ids)."""
        return self._windows(chunks)

    def encode_jobs(self, jobs: Sequence[WindowJob]) -> list[Window]:
        return [Window(j.chunk_id, j.index, j.span.start, j.span.end, self._vector(j.text)) for j in jobs]

    def embed_chunks(self, chunks: Sequence[Chunk]) -> list[Window]:
        """One window per WINDOW_TOKENS tokens of each chunk, spans covering its text."""
        return self.encode_jobs(self._windows(chunks))

    def _windows(self, chunks: Sequence[Chunk]) -> list[WindowJob]:
        out: list[WindowJob] = []
        for chunk in chunks:
            tokens = list(_TOKEN.finditer(chunk.text))
            starts = list(range(0, max(len(tokens), 1), self.max_tokens))
            for i, first in enumerate(starts):
                last = min(first + self.max_tokens, len(tokens)) - 1
                start = tokens[first].start() if tokens else 0
                end = tokens[last].end() if tokens else len(chunk.text)
                if i == len(starts) - 1:
                    end = len(chunk.text)
                if i == 0:
                    start = 0
                out.append(WindowJob(chunk.chunk_id, i, WindowSpan(start, end), (), chunk.text[start:end]))
        return out
