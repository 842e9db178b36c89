"""The chunker: whole paragraphs, never across a heading, overlapping by whole paragraphs.

Chunks of a long section land in a 550–750 token band (tokens of the embedding model's
tokenizer); consecutive chunks of one section share their boundary paragraphs byte for
byte, and each chunk records how many characters it shares with its neighbours so that
the overlap can be stripped later by equality. No chunk is longer than MAX_CHUNK_CHARS: a
paragraph longer than that is cut, at a sentence end or else a blank, into pieces whose
concatenation is the paragraph; pieces of one paragraph never share a chunk (they would
be joined by a separator the source does not have) and are not carried as overlap.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from ingest.document import LoadedDocument, Paragraph
from search.types import Chunk

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
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_BLANKS = re.compile(r"\s+")


@dataclass(frozen=True)
class ChunkingConfig:
    band_min: int = BAND_MIN_TOKENS
    band_max: int = BAND_MAX_TOKENS
    overlap_max: int = OVERLAP_MAX_TOKENS
    max_chars: int = MAX_CHUNK_CHARS


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
    blanks, else after a run of blanks, else at max_chars; "".join(pieces) == text."""
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
        cut = cut or max_chars
        pieces.append(text[start : start + cut])
        start += cut
    pieces.append(text[start:])
    return pieces


def plan_section(tokens: list[int], cfg: ChunkingConfig, chars: list[int] | None = None,
                 joinable: list[bool] | None = None) -> list[tuple[int, int]]:
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

    if n == 1 or (total <= cfg.band_max and all(joinable[1:])
                  and sum(chars) + sep * (n - 1) <= cfg.max_chars):
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
        while (back - 1 > start and carried + tokens[back - 1] <= cfg.overlap_max
               and carried_chars + sep + chars[back - 1] + sep + chars[end] <= cfg.max_chars):
            back -= 1
            carried += tokens[back]
            carried_chars += sep + chars[back]
        if back <= start or not fits(end, carried_chars):
            # A chunk of one paragraph (carry nothing, or we never progress), a piece of a
            # cut paragraph next, or no room for the overlap under the character cap.
            back = end
        start, first_new = back, end


def chunk_document(
    doc: LoadedDocument,
    doc_id: str,
    count_tokens: Callable[[str], int],
    cfg: ChunkingConfig | None = None,
) -> list[Chunk]:
    """Split a loaded document into chunks in reading order; each carries the document's
    address (as ingest checked it) and its section's anchor."""
    cfg = cfg or ChunkingConfig()
    superseded = doc.superseded()
    chunks: list[Chunk] = []
    for section in doc.sections:
        paras: list[Paragraph] = []
        joinable: list[bool] = []
        for p in section.paragraphs:
            pieces = cut_paragraph(p.text, cfg.max_chars)
            paras += [Paragraph(piece, p.page) for piece in pieces]
            joinable += [True] + [False] * (len(pieces) - 1)
        tokens = [count_tokens(p.text) for p in paras]
        plan = plan_section(tokens, cfg, [len(p.text) for p in paras], joinable)
        prev_end = 0
        for i, (start, end) in enumerate(plan):
            group = paras[start:end]
            text = PARAGRAPH_SEPARATOR.join(p.text for p in group)
            shared = prev_end - start if i > 0 else 0
            overlap_prev = (
                len(PARAGRAPH_SEPARATOR.join(p.text for p in paras[start:prev_end])) if shared > 0 else 0
            )
            if i + 1 < len(plan):
                nstart = plan[i + 1][0]
                overlap_next = (
                    len(PARAGRAPH_SEPARATOR.join(p.text for p in paras[nstart:end])) if nstart < end else 0
                )
            else:
                overlap_next = 0
            ordinal = len(chunks)
            chunks.append(
                Chunk(
                    chunk_id=chunk_id_for(doc.source, ordinal, text),
                    doc_id=doc_id,
                    source=doc.source,
                    heading_path=section.heading_path,
                    page=_page_label(group),
                    ordinal=ordinal,
                    text=text,
                    tokens=count_tokens(text),
                    overlap_prev=overlap_prev,
                    overlap_next=overlap_next,
                    superseded=superseded,
                    url=doc.url,
                    anchor=section.anchor,
                )
            )
            prev_end = end
    return chunks
