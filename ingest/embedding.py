"""What the ingest needs of an embedder, as a Protocol: ingest.embedder.Embedder (the model)
has it, and so does any stand-in (bot.testing.embedder.HashingEmbedder) without subclassing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ingest.embedder import WindowJob
from search.types import Chunk, ModelStamp, Window


class IngestEmbedder(Protocol):
    """Counts tokens for chunking, plans and embeds the windows, and encodes the texts that
    calibrate the refusal gate; `stamp` names the model the store is bound to."""

    @property
    def stamp(self) -> ModelStamp: ...

    def count_tokens(self, text: str) -> int: ...

    def plan(self, chunks: Sequence[Chunk]) -> list[WindowJob]: ...

    def encode_jobs(self, jobs: Sequence[WindowJob]) -> list[Window]: ...

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray: ...
