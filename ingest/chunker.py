"""The chunker: whole paragraphs, never across a heading, overlapping by whole paragraphs.

Chunks of a long section land in a 550–750 token band (tokens of the embedding model's
tokenizer); consecutive chunks of one section share their boundary paragraphs byte for
byte, and each chunk records how many characters it shares with its neighbours so that
the overlap can be stripped later by equality. No chunk is longer than MAX_CHUNK_CHARS: a
paragraph longer than that is cut, at a sentence end or else a blank, into pieces whose
concatenation is the paragraph; pieces of one paragraph never share a chunk (they would
be joined by a separator the source does not have) and are not carried as overlap.

A section under STUB_TOKENS (a heading and a line, a stub page's one paragraph) is joined
with a neighbouring section of the same document and page into one chunk, which lists
each section's own heading and anchor where its text begins (Chunk.sections): a quotation
is cited under the heading it sits under, and the chunk as a whole under the heading all
of them share.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from ingest.document import LoadedDocument, Paragraph, Section
from search.types import Chunk, ChunkSection, common_prefix

PARAGRAPH_SEPARATOR = "\n\n"

# The band most chunks of a long section land in. 750 tokens is about three embedding
# windows of 256, and answers need several paragraphs of context; below ~550 a chunk of
# this kind of prose rarely holds a whole procedure or account.
BAND_MIN_TOKENS = 550
BAND_MAX_TOKENS = 750
# The trailing paragraphs carried into the next chunk, at most this many tokens (at
# least one paragraph always, so no boundary sentence is seen only out of context).
OVERLAP_MAX_TOKENS = 160
# The hard size of a chunk in characters, whatever its tokens. Above the longest real
# paragraph of the collections here (12,487 characters: a list in the 18F handbook's
# index) and about 4,000 tokens, 5x the band; a 4.9 M-character paragraph was one chunk
# and reached the model whole.
MAX_CHUNK_CHARS = 16_000
# A cut looks for a sentence end, then a blank, in the last part of the window only, so no
# piece is much shorter than the cap.
_CUT_SEARCH_SHARE = 0.5
# A section under this many tokens does not stand alone: it joins a neighbouring section of
# its document and page when both fit one chunk (at most band_max tokens) under a common
# heading. 16% of the 18F handbook's chunks and 26% of CivicActions' were under 50 tokens
# and crowded the top 5 (docs/decisions/0029-short-chunks.md).
STUB_TOKENS = 50
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_BLANKS = re.compile(r"\s+")
# A cut at max_chars (a window with no blank: Thai, Khmer, Burmese) steps back over at
# most this many combining marks, so no piece starts with the vowel sign or tone mark of
# the letter before it; 30 is Unicode's stream-safe limit on marks in a row (UAX #15).
# docs/decisions/0061-combining-marks-inside-words.md
HARD_CUT_MARKS_MAX = 30


@dataclass(frozen=True)
class ChunkingConfig:
    band_min: int = BAND_MIN_TOKENS
    band_max: int = BAND_MAX_TOKENS
    overlap_max: int = OVERLAP_MAX_TOKENS
    max_chars: int = MAX_CHUNK_CHARS
    stub_tokens: int = STUB_TOKENS


def doc_id_for(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def chunk_id_for(source: str, ordinal: int, text: str) -> str:
    """Stable across re-ingests: the same file content gives the same ids."""
    h = hashlib.sha256(f"{source}\x00{ordinal}\x00{text}".encode())
    return h.hexdigest()[:20]


def _page_label(paras: list[Paragraph]) -> str | None:
    pages = [p.page for p in paras if p.page is not None]
    if not pages:
        return None
    return pages[0] if pages[0] == pages[-1] else f"{pages[0]}–{pages[-1]}"


def cut_paragraph(text: str, max_chars: int = MAX_CHUNK_CHARS) -> list[str]:
    """The paragraph in pieces of at most max_chars, cut after a sentence end and its
    blanks, else after a run of blanks, else at max_chars (before the combining marks of
    the letter there); "".join(pieces) == text."""
    pieces: list[str] = []
    start = 0
    while len(text) - start > max_chars:
        window = text[start : start + max_chars]
        floor = int(max_chars * _CUT_SEARCH_SHARE)
        cut = 0
        for pattern in (_SENTENCE_END, _BLANKS):
            for m in pattern.finditer(window, floor):
                cut = m.end()
            if cut:
                break
        cut = cut or _off_marks(text, start, max_chars)
        pieces.append(text[start : start + cut])
        start += cut
    pieces.append(text[start:])
    return pieces


def _off_marks(text: str, start: int, cut: int) -> int:
    """A cut at start + cut moved back before the combining marks that follow it (at most
    HARD_CUT_MARKS_MAX of them, never to the start): a mark stays with its letter."""
    back = cut
    while back > 1 and cut - back < HARD_CUT_MARKS_MAX and unicodedata.category(text[start + back])[0] == "M":
        back -= 1
    return back if unicodedata.category(text[start + back])[0] != "M" else cut


def plan_section(
    tokens: list[int], cfg: ChunkingConfig, chars: list[int] | None = None, joinable: list[bool] | None = None
) -> list[tuple[int, int]]:
    """Paragraph index ranges [start, end) of a section's chunks, overlap included.

    Chunks aim at an even size (total / count) so a long section does not end in a
    stub; each adds at least one new paragraph, so the plan always ends. With `chars`
    (each paragraph's length, none over cfg.max_chars) no chunk grows past cfg.max_chars;
    a paragraph whose `joinable` is False never shares a chunk with the one before it.
    """
    n = len(tokens)
    total = sum(tokens)
    sep = len(PARAGRAPH_SEPARATOR)
    chars = chars if chars is not None else [0] * n
    joinable = joinable if joinable is not None else [True] * n

    def fits(i: int, size_chars: int) -> bool:  # paragraph i may join a chunk of size_chars
        return joinable[i] and size_chars + sep + chars[i] <= cfg.max_chars

    if n == 1 or (total <= cfg.band_max and all(joinable[1:]) and sum(chars) + sep * (n - 1) <= cfg.max_chars):
        return [(0, n)]
    # Expected chunks: each new chunk adds about (band_max - overlap) fresh tokens.
    fresh = max(1, cfg.band_max - cfg.overlap_max // 2)
    count = max(2, math.ceil((total - cfg.band_max) / fresh) + 1)
    target = min(cfg.band_max, max(cfg.band_min, (total + (count - 1) * cfg.overlap_max // 2) / count))
    ranges: list[tuple[int, int]] = []
    start = 0
    first_new = 0
    while True:
        end = start
        size = 0
        size_chars = -sep
        while end < n:
            grown = size + tokens[end]
            if end > first_new and (grown > cfg.band_max or not fits(end, size_chars)):
                break
            size = grown
            size_chars += sep + chars[end]
            end += 1
            if end > first_new and size >= target:
                # Take the rest when it would only make a stub chunk of its own.
                rest = sum(tokens[end:])
                if 0 < rest and size + rest <= cfg.band_max:
                    continue
                break
        ranges.append((start, end))
        if end >= n:
            return ranges
        # Overlap: whole trailing paragraphs, at least one, within the overlap budget.
        back = end - 1
        carried = tokens[back]
        carried_chars = chars[back]
        while (
            back - 1 > start
            and carried + tokens[back - 1] <= cfg.overlap_max
            and carried_chars + sep + chars[back - 1] + sep + chars[end] <= cfg.max_chars
        ):
            back -= 1
            carried += tokens[back]
            carried_chars += sep + chars[back]
        if back <= start or not fits(end, carried_chars):
            # A chunk of one paragraph (carry nothing, or we never progress), a piece of a
            # cut paragraph next, or no room for the overlap under the character cap.
            back = end
        start, first_new = back, end


@dataclass
class _Run:
    """Sections chunked together (one, or short ones joined): their paragraphs (a long one
    cut in pieces), token counts, and the index of each section's first paragraph."""

    sections: list[Section]
    paras: list[Paragraph] = field(default_factory=list)
    joinable: list[bool] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)

    def add(self, other: _Run) -> _Run:
        n = len(self.paras)
        return _Run(
            self.sections + other.sections,
            self.paras + other.paras,
            self.joinable + other.joinable,
            self.tokens + other.tokens,
            self.starts + [n + s for s in other.starts],
        )

    def chars(self) -> int:
        return sum(len(p.text) for p in self.paras) + len(PARAGRAPH_SEPARATOR) * (len(self.paras) - 1)


def _run_of(section: Section, count_tokens: Callable[[str], int], cfg: ChunkingConfig) -> _Run:
    run = _Run([section], starts=[0])
    for p in section.paragraphs:
        pieces = cut_paragraph(p.text, cfg.max_chars)
        run.paras += [Paragraph(piece, p.page) for piece in pieces]
        run.joinable += [True] + [False] * (len(pieces) - 1)
    run.tokens = [count_tokens(p.text) for p in run.paras]
    return run


def _fits(a: _Run, b: _Run, cfg: ChunkingConfig) -> bool:
    """Whether two runs make one chunk: within band_max tokens and the character cap, no
    cut paragraph, one page, and a heading both sit under."""
    return (
        sum(a.tokens) + sum(b.tokens) <= cfg.band_max
        and a.chars() + len(PARAGRAPH_SEPARATOR) + b.chars() <= cfg.max_chars
        and all(a.joinable)
        and all(b.joinable)
        and len({p.page for p in a.paras + b.paras}) == 1
        and bool(common_prefix([a.sections[0].heading_path, b.sections[0].heading_path]))
    )


def _under(child: _Run, parent: _Run) -> bool:
    c, p = child.sections[0].heading_path, parent.sections[-1].heading_path
    return len(c) > len(p) and c[: len(p)] == p


def join_short(runs: list[_Run], cfg: ChunkingConfig) -> list[_Run]:
    """Runs in order, each section under cfg.stub_tokens joined with a neighbour when they
    fit one chunk: with the run before it, unless it leads sections of its own (a heading
    and an introduction) and fits with them."""
    out: list[_Run] = []
    for i, run in enumerate(runs):
        if out and _fits(out[-1], run, cfg):
            leads = i + 1 < len(runs) and _under(runs[i + 1], run) and _fits(run, runs[i + 1], cfg)
            if sum(out[-1].tokens) < cfg.stub_tokens or (sum(run.tokens) < cfg.stub_tokens and not leads):
                out[-1] = out[-1].add(run)
                continue
        out.append(run)
    return out


def _headings(run: _Run, text_starts: list[int]) -> tuple[tuple[str, ...], str | None, tuple[ChunkSection, ...]]:
    """The heading path and anchor of a run's chunk, and its sections when it joins several."""
    if len(run.sections) == 1:
        return run.sections[0].heading_path, run.sections[0].anchor, ()
    path = common_prefix([s.heading_path for s in run.sections])
    parts = tuple(ChunkSection(start, s.heading_path, s.anchor) for start, s in zip(text_starts, run.sections))
    return path, run.sections[0].anchor_of(len(path)), parts


def chunk_document(
    doc: LoadedDocument, doc_id: str, count_tokens: Callable[[str], int], cfg: ChunkingConfig | None = None
) -> list[Chunk]:
    """Split a loaded document into chunks in reading order; each carries the document's
    address (as ingest checked it) and its section's anchor (or its sections' own)."""
    cfg = cfg or ChunkingConfig()
    superseded = doc.superseded()
    chunks: list[Chunk] = []
    sep = len(PARAGRAPH_SEPARATOR)
    for run in join_short([_run_of(s, count_tokens, cfg) for s in doc.sections], cfg):
        paras, tokens = run.paras, run.tokens
        plan = plan_section(tokens, cfg, [len(p.text) for p in paras], run.joinable)
        offsets = [0]
        for p in paras:
            offsets.append(offsets[-1] + len(p.text) + sep)
        # A joined run is one chunk (join_short keeps it within the band and the cap).
        heading_path, anchor, parts = _headings(run, [offsets[i] for i in run.starts])
        prev_end = 0
        for i, (start, end) in enumerate(plan):
            group = paras[start:end]
            text = PARAGRAPH_SEPARATOR.join(p.text for p in group)
            shared = prev_end - start if i > 0 else 0
            overlap_prev = len(PARAGRAPH_SEPARATOR.join(p.text for p in paras[start:prev_end])) if shared > 0 else 0
            if i + 1 < len(plan):
                nstart = plan[i + 1][0]
                overlap_next = len(PARAGRAPH_SEPARATOR.join(p.text for p in paras[nstart:end])) if nstart < end else 0
            else:
                overlap_next = 0
            ordinal = len(chunks)
            chunks.append(
                Chunk(
                    chunk_id=chunk_id_for(doc.source, ordinal, text),
                    doc_id=doc_id,
                    source=doc.source,
                    heading_path=heading_path,
                    page=_page_label(group),
                    ordinal=ordinal,
                    text=text,
                    tokens=count_tokens(text),
                    overlap_prev=overlap_prev,
                    overlap_next=overlap_next,
                    superseded=superseded,
                    url=doc.url,
                    anchor=anchor,
                    sections=parts,
                )
            )
            prev_end = end
    return chunks
