"""Stale citations: a turn whose cited passage has changed or vanished since it was answered.

Computed when a turn is read, never stored: the turn's cited chunks (its citations and
quotations) are looked up among the store's current chunks of their sources
(Store.chunk_versions). A chunk id names one text at one place in one document
(ingest/chunker.py chunk_id_for), so a cited id still stored is the text that was cited;
a cited text found again elsewhere in its document (the passage moved: the turn records
each passage's text hash) is not stale either. Anything else is: "changed" while its
document is still stored (with the newest change time of the document's chunks since the
turn, when the store recorded one), "vanished" when the document is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from search.store import Store
from search.types import ChunkVersion

WORDING = "the passage this answer quoted has changed since"


@dataclass(frozen=True)
class StaleCitation:
    turn_id: str
    chunk_id: str
    source: str
    reason: str  # "changed" or "vanished"
    changed_at: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk_id, "source": self.source, "reason": self.reason, "changed_at": self.changed_at}


def cited(record: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(chunk id, source, text hash or None) of each passage the answer cites or quotes."""
    if record.get("refused"):
        return []
    passages = {p.get("chunk_id"): p for p in record.get("passages") or [] if p.get("chunk_id")}
    ids: list[str] = []
    for item in [*(record.get("citations") or []), *(record.get("quotes") or [])]:
        chunk_id = item.get("chunk_id")
        if chunk_id and chunk_id not in ids and (chunk_id in passages or item.get("source")):
            ids.append(chunk_id)
    out = []
    for chunk_id in ids:
        p = passages.get(chunk_id, {})
        source = p.get("source") or next(
            (c.get("source") for c in record.get("citations") or [] if c.get("chunk_id") == chunk_id), None
        )
        if source:
            out.append((chunk_id, str(source), p.get("text_hash")))
    return out


def stale_citations(
    store: Store, records: Iterable[dict[str, Any]], allows: Callable[[dict[str, Any], str], bool] | None = None
) -> list[StaleCitation]:
    """The stale citations of these turns, in their order (`allows(record, source)`: a
    source the reader may see; others are left out)."""
    wanted = [(r, c) for r in records for c in cited(r) if allows is None or allows(r, c[1])]
    if not wanted:
        return []
    versions = store.chunk_versions(sorted({c[1] for _, c in wanted}))
    return _judge(wanted, versions)


def _judge(
    wanted: Sequence[tuple[dict[str, Any], tuple[str, str, str | None]]], versions: Sequence[ChunkVersion]
) -> list[StaleCitation]:
    ids = {v.chunk_id for v in versions}
    texts = {(v.source, v.text_hash) for v in versions}
    by_source: dict[str, list[ChunkVersion]] = {}
    for v in versions:
        by_source.setdefault(v.source, []).append(v)
    out = []
    for record, (chunk_id, source, digest) in wanted:
        if chunk_id in ids or (digest is not None and (source, digest) in texts):
            continue
        at = str(record.get("created_at") or "")
        later = [v.changed_at for v in by_source.get(source, []) if v.changed_at and v.changed_at > at]
        out.append(
            StaleCitation(
                str(record.get("turn_id")),
                chunk_id,
                source,
                "changed" if source in by_source else "vanished",
                max(later, default=None),
            )
        )
    return out


def stale_of(store: Store, record: dict[str, Any]) -> list[dict[str, Any]]:
    """One turn's stale citations, as `citebot turns show` prints them ("stale")."""
    return [s.as_dict() for s in stale_citations(store, [record])]
