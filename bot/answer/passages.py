"""Passages: the retrieved chunks handed to the composer, numbered, overlap stripped."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from bot.answer.checks import quote_in
from search.retrieval import given_chunks
from search.types import Chunk, Hit, WindowScore


@dataclass(frozen=True)
class Passage:
    """Passage N of a turn: a chunk and the text the composer is given for it."""

    number: int
    chunk: Chunk
    text: str
    # The chunk's embedding windows that fall in this text (spans in `text`), each with its
    # cosine to the question (with_windows); empty when nobody read them.
    windows: tuple[WindowScore, ...] = ()

    @property
    def heading(self) -> str:
        return " > ".join(self.chunk.heading_path)


def cited_under(chunk: Chunk, quotations: Sequence[str]) -> tuple[tuple[str, ...], str | None]:
    """The heading path and anchor a passage is cited under. A chunk that joins short
    sections (Chunk.sections) is cited under the section its quotations stand in, when they
    all stand in one and in no other; otherwise, and for any other chunk, under its own
    heading (for a joined chunk, the one all its sections sit under)."""
    if not chunk.sections or not quotations:
        return chunk.heading_path, chunk.anchor
    spans = chunk.section_spans()
    found = set()
    for q in quotations:
        holding = [(path, anchor) for start, end, path, anchor in spans if quote_in(q, chunk.text[start:end])]
        if len(holding) != 1:
            return chunk.heading_path, chunk.anchor
        found.add(holding[0])
    return found.pop() if len(found) == 1 else (chunk.heading_path, chunk.anchor)


def strip_overlap(chunk: Chunk, previous: Chunk | None) -> str:
    """The chunk's text without the paragraphs it shares with a previous chunk also given.

    The overlap is removed only when it is byte-identical to the previous chunk's tail,
    so a stale overlap mark can never cut text that the reader has not seen.
    """
    n = chunk.overlap_prev
    if (
        previous is None
        or n <= 0
        or previous.doc_id != chunk.doc_id
        or previous.ordinal != chunk.ordinal - 1
        or chunk.text[:n] != previous.text[len(previous.text) - n :]
    ):
        return chunk.text
    return chunk.text[n:].lstrip("\n")


def numbered(chunks: Sequence[Chunk]) -> list[Passage]:
    """The chunks as passages numbered from 1, in order, each without the overlap it shares
    with the chunk before it in the document when that one is given too."""
    by_position = {(c.doc_id, c.ordinal): c for c in chunks}
    return [
        Passage(i + 1, c, strip_overlap(c, by_position.get((c.doc_id, c.ordinal - 1)))) for i, c in enumerate(chunks)
    ]


def select_passages(hits: list[Hit], count: int, widen: Callable[[Chunk], Chunk | None] | None = None) -> list[Passage]:
    """The top hits as numbered passages, in rank order; with `widen`, a hit cut at a
    boundary is followed by its neighbour (search.retrieval.given_chunks, the one widening
    a turn's retrieval does)."""
    return numbered(given_chunks(hits, count, widen))


def with_windows(passages: Sequence[Passage], scores: Mapping[str, Sequence[WindowScore]]) -> list[Passage]:
    """The passages with their chunks' window scores (search.Retriever.window_scores, read
    into the turn's Retrieval), spans moved from the chunk's text into the passage's (which
    may have lost its overlap)."""
    out = []
    for p in passages:
        cut = len(p.chunk.text) - len(p.text)
        windows = tuple(
            WindowScore(max(0, w.start - cut), w.end - cut, w.score)
            for w in scores.get(p.chunk.chunk_id, ())
            if w.end > cut
        )
        out.append(replace(p, windows=windows))
    return out
