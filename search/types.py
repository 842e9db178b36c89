"""Values that cross module boundaries: chunks, stamps, hits, queries."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from search.errors import DimensionError


@dataclass(frozen=True)
class ModelStamp:
    """Which embedding model made a vector, on which runtime at which precision: a store
    refuses vectors of any other. A stamp written before the runtime was recorded reads
    as torch at fp32, which is what made every vector then."""

    name: str
    dims: int
    checksum: str
    runtime: str = "torch"
    precision: str = "fp32"

    def serves(self, other: ModelStamp) -> bool:
        """Whether a store built with `other` may be queried with this stamp: the same model
        at the same precision. At fp32 every runtime computes the same vectors (ONNX Runtime
        against torch and sentence-transformers: cosine above 0.99999, tests/test_onnx_encoder.py),
        so a store built before ONNX Runtime keeps working; int8 sits ~0.01 of cosine away.
        The model is its weights (dims and checksum): the name is what the error shows, and a
        store of all-mpnet-base-v2 stamped before the stamp named it (it read as MiniLM's
        name, docs/decisions/0038-mpnet-second-model.md) keeps working."""
        same_model = (self.dims, self.checksum, self.precision) == (other.dims, other.checksum, other.precision)
        return same_model and (self.runtime == other.runtime or self.precision == "fp32")

    def describe(self) -> str:
        return f"{self.name} ({self.dims} dims, checksum {self.checksum[:12]}, {self.runtime} {self.precision})"

    def as_dict(self) -> dict[str, str | int]:
        return {
            "name": self.name,
            "dims": self.dims,
            "checksum": self.checksum,
            "runtime": self.runtime,
            "precision": self.precision,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ModelStamp:
        """A stamp as a store wrote it (runtime and precision absent in older stores)."""
        return cls(
            data["name"],
            int(data["dims"]),
            data["checksum"],
            data.get("runtime", "torch"),
            data.get("precision", "fp32"),
        )

    def check_widths(self, windows: Sequence[Window]) -> None:
        """Refuse a batch holding a vector of any other width than this model's."""
        for w in windows:
            if w.vector.shape != (self.dims,):
                raise DimensionError(
                    f"a vector of width {w.vector.shape} was offered to a store of "
                    f"{self.dims}-dimensional vectors ({self.describe()}); refusing the batch"
                )


@dataclass(frozen=True)
class ChunkSection:
    """One section of a chunk that joins short sections: where its paragraphs begin in the
    chunk's text, and its own heading path and anchor."""

    start: int
    heading_path: tuple[str, ...]
    anchor: str | None = None


@dataclass(frozen=True)
class Chunk:
    """A stored passage. `text` is verbatim source text and is never rebuilt.

    `overlap_prev` is the length in characters of the leading paragraphs this chunk
    shares byte for byte with the previous chunk of the same section; `overlap_next`
    the length of the trailing paragraphs it shares with the next one.

    A chunk of one section has that section's heading path and anchor, and no `sections`.
    A chunk that joins short sections of one document (ingest/chunker.py) lists them in
    `sections`, in order, each with its own heading and anchor; its `heading_path` and
    `anchor` are then those of the heading all of them sit under (the longest common
    prefix), which is right for any part of it (docs/decisions/0029-short-chunks.md).
    """

    chunk_id: str
    doc_id: str
    source: str
    heading_path: tuple[str, ...]
    page: str | None
    ordinal: int
    text: str
    tokens: int
    overlap_prev: int = 0
    overlap_next: int = 0
    superseded: bool = False  # its document says it is deprecated or superseded
    # Where a person opens it (search/links.py): its document's own address (front matter or
    # canonical link, checked at ingest) and the id of its heading in the HTML, when known.
    url: str | None = None
    anchor: str | None = None
    sections: tuple[ChunkSection, ...] = ()

    def section_spans(self) -> list[tuple[int, int, tuple[str, ...], str | None]]:
        """(start, end, heading path, anchor) of each section's text in `text`: one span,
        the whole text, for a chunk of one section."""
        if not self.sections:
            return [(0, len(self.text), self.heading_path, self.anchor)]
        ends = [s.start for s in self.sections[1:]] + [len(self.text)]
        return [(s.start, end, s.heading_path, s.anchor) for s, end in zip(self.sections, ends)]

    def headings_between(self, start: int, end: int) -> tuple[str, ...]:
        """The heading path every section overlapping text[start:end] sits under."""
        paths = [p for a, b, p, _ in self.section_spans() if a < end and b > start] or [self.heading_path]
        return common_prefix(paths)

    def heading_text(self) -> str:
        """The words of every heading of the chunk, for the lexical heading field."""
        return heading_text(self.heading_path, self.sections)

    def without_overlap_prev(self) -> str:
        """The text with the leading overlap removed (it is already in the previous chunk)."""
        return self.text[self.overlap_prev :].lstrip("\n")


def heading_text(heading_path: Sequence[str], sections: Sequence[ChunkSection]) -> str:
    """Chunk.heading_text of a chunk with this heading path and these sections."""
    if not sections:
        return " ".join(heading_path)
    seen: list[str] = list(heading_path)
    for s in sections:
        seen += [h for h in s.heading_path[len(heading_path) :] if h not in seen]
    return " ".join(seen)


def sections_as_data(sections: Sequence[ChunkSection]) -> list[dict] | None:
    """A chunk's sections as the stores keep them (JSON); None for a chunk of one section."""
    if not sections:
        return None
    return [{"start": s.start, "heading_path": list(s.heading_path), "anchor": s.anchor} for s in sections]


def sections_from_data(data: Sequence[dict] | None) -> tuple[ChunkSection, ...]:
    """A chunk's sections from what a store kept (None or absent: a chunk of one section)."""
    return tuple(ChunkSection(int(d["start"]), tuple(d.get("heading_path") or ()), d.get("anchor")) for d in data or ())


def common_prefix(paths: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    """The longest heading path that starts every one of these."""
    if not paths:
        return ()
    first = paths[0]
    n = len(first)
    for p in paths[1:]:
        n = min(n, len(p))
        while n and p[:n] != first[:n]:
            n -= 1
    return first[:n]


@dataclass(frozen=True)
class Window:
    """One embedding window of a chunk: a character span and its unit vector."""

    chunk_id: str
    index: int
    start: int
    end: int
    vector: np.ndarray


@dataclass(frozen=True)
class WindowScore:
    """How near one window of a chunk lies to a query: its span in the chunk's text and
    the cosine of its vector with the query vector."""

    start: int
    end: int
    score: float


@dataclass(frozen=True)
class DocumentRecord:
    """One ingested file."""

    doc_id: str
    source: str
    content_hash: str
    title: str
    format: str


@dataclass(frozen=True)
class WeightedTerms:
    """A group of lexical terms searched together with one weight (aliases get less).
    A stemmed group searches the terms' stems (search.text.query_stems) in the stemmed
    fields, so "restarting" finds "restarts"; an unstemmed one searches the words."""

    terms: tuple[str, ...]
    weight: float = 1.0
    stemmed: bool = False


@dataclass(frozen=True)
class LexicalQuery:
    """What the lexical arm searches: weighted term groups and weighted phrases."""

    groups: tuple[WeightedTerms, ...]
    phrases: tuple[tuple[str, float], ...] = ()


@dataclass
class Hit:
    """A retrieved chunk with both arm ranks and the fused score."""

    chunk: Chunk
    score: float
    dense_rank: int | None = None
    lexical_rank: int | None = None
    dense_score: float | None = None
    lexical_score: float | None = None
    reasons: list[str] = field(default_factory=list)


def text_hash(text: str) -> str:
    """The hash of a passage's text that a turn records and a store keeps beside the chunk,
    so a citation can be checked against the collection later (bot/owners/stale.py)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


@dataclass(frozen=True)
class ChunkVersion:
    """A stored chunk's identity and age: its text's hash and when an ingest last wrote a
    different text for it (None: stored by a citebot that did not record it)."""

    chunk_id: str
    source: str
    text_hash: str
    changed_at: str | None
