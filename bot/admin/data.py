"""What the /admin pages show, read from the turn log and the store (nothing is stored for
the page): the gaps report (bot/owners/gaps.py), answers per day by outcome, recent turns
with filters, coverage by folder, and the ingest history the store keeps (each chunk's
`changed_at`: when an ingest or sync last wrote a different text for it).

An Access bound to a channel reads only that channel's turns and names only the sources
its scope may read, as `citebot gaps --channel` does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from bot.admin.auth import Access
from bot.owners.gaps import build_report
from bot.owners.outcome import outcome_of
from bot.owners.stale import stale_citations
from search.scope import Scope
from search.store import Store

ANSWERED, FAILED = "answered", "failed"
# The outcomes a day's bar is split into, bottom first (bot/owners/outcome.py, plus a
# turn answered well and one the service failed).
DAY_OUTCOMES = (ANSWERED, "weak", "voted_down", "failed_check", "refused", FAILED)
FILTERS = ("all", "refused", "failed_check", "voted_down", "weak", "stale", "failed")
TURNS_SHOWN = 200  # rows of the recent turns table, newest first
HISTORY_DAYS = 30  # days of ingest history shown
TOP = "(top level)"


@dataclass
class Reader:
    """Where the pages read from; each part called when a page needs it."""

    turnlog: Any
    store: Callable[[], Store]
    encode: Callable[[Sequence[str]], np.ndarray]
    scope_of: Callable[[str], Scope]  # a channel's scope (bot/slack/scopes.py)
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def scope(self, access: Access) -> Scope | None:
        return self.scope_of(access.channel) if access.channel else None

    def allows(self, access: Access) -> Callable[[str], bool]:
        scope = self.scope(access)
        return (lambda _s: True) if scope is None else scope.allows

    def turns(self, access: Access, period: timedelta) -> list[dict[str, Any]]:
        """The period's turns, oldest first (only the channel's, for a bound access)."""
        since = (self.clock() - period).isoformat()
        return [
            r for r in self.turnlog.turns_since(since) if access.channel is None or r.get("channel") == access.channel
        ]

    def gaps(self, access: Access, period: timedelta) -> dict[str, Any]:
        store = self.store()
        stamp = store.stamp()
        scope = self.scope(access)
        return build_report(
            self.turnlog,
            store,
            self.encode,
            period=period,
            channels=[access.channel] if access.channel else (),
            scope_of=(lambda _c: scope),
            now=self.clock(),
            dims=stamp.dims if stamp else None,
        )

    def stale_turns(self, access: Access, records: Iterable[dict[str, Any]]) -> set[str]:
        allows = self.allows(access)
        return {s.turn_id for s in stale_citations(self.store(), records, lambda _r, src: allows(src))}

    def turn(self, access: Access, turn_id: str) -> dict[str, Any] | None:
        """One turn, or None when unknown or outside the access's channel."""
        record = self.turnlog.get_turn(turn_id)
        if record is None or (access.channel is not None and record.get("channel") != access.channel):
            return None
        return record

    def sources(self, access: Access) -> list[str]:
        allows = self.allows(access)
        return sorted(s for s in self.store().document_hashes() if allows(s))


def outcome(record: dict[str, Any]) -> str:
    """A turn's outcome for the chart and the table: the gaps report's, else answered or failed."""
    if record.get("error"):
        return FAILED
    return outcome_of(record) or ANSWERED


def per_day(records: Iterable[dict[str, Any]], since: datetime, until: datetime) -> list[tuple[str, Counter]]:
    """(day, outcome counts) for each UTC day from `since` to `until`, empty days included."""
    days: dict[str, Counter] = {}
    day = since.astimezone(UTC).date()
    while day <= until.astimezone(UTC).date():
        days[day.isoformat()] = Counter()
        day += timedelta(days=1)
    for r in records:
        key = str(r.get("created_at") or "")[:10]
        if key in days:
            days[key][outcome(r)] += 1
    return list(days.items())


def filtered(records: Sequence[dict[str, Any]], which: str, stale: set[str]) -> list[dict[str, Any]]:
    """The newest TURNS_SHOWN turns matching a filter of FILTERS."""
    if which == "stale":
        chosen = [r for r in records if r.get("turn_id") in stale]
    elif which == "all":
        chosen = list(records)
    else:
        chosen = [r for r in records if outcome(r) == which]
    return list(reversed(chosen))[:TURNS_SHOWN]


def folder_of(source: str) -> str:
    head, sep, _ = source.partition("/")
    return head if sep else TOP


def _cited_sources(record: dict[str, Any]) -> set[str]:
    return {str(c.get("source")) for c in record.get("citations") or [] if c.get("source")}


def _nearest_source(record: dict[str, Any]) -> str | None:
    shown = record.get("passages") or record.get("candidates") or []
    return str(shown[0].get("source")) if shown and shown[0].get("source") else None


def coverage(
    store: Store, sources: Sequence[str], records: Iterable[dict[str, Any]], allows: Callable[[str], bool]
) -> list[dict[str, Any]]:
    """Per folder: documents, chunks, turns of the period that cited it, and turns not
    answered well whose nearest passage was in it (where a gap's answer may belong)."""
    rows: dict[str, Counter] = {}
    for s in sources:
        rows.setdefault(folder_of(s), Counter())["documents"] += 1
    for v in store.chunk_versions(list(sources)) if sources else []:
        rows.setdefault(folder_of(v.source), Counter())["chunks"] += 1
    for r in records:
        for folder in {folder_of(s) for s in _cited_sources(r) if allows(s)}:
            rows.setdefault(folder, Counter())["cited"] += 1
        near = _nearest_source(r)
        if near and allows(near) and outcome(r) not in (ANSWERED, FAILED):
            rows.setdefault(folder_of(near), Counter())["gaps"] += 1
    return [
        {"folder": f, **{k: c[k] for k in ("documents", "chunks", "cited", "gaps")}} for f, c in sorted(rows.items())
    ]


def ingest_history(store: Store, sources: Sequence[str]) -> dict[str, Any]:
    """What the store records of ingests and syncs: per day, the chunks written with a new
    text and the documents they belong to (newest HISTORY_DAYS days that have any), and the
    chunks stored before citebot recorded the time."""
    chunks: Counter = Counter()
    documents: dict[str, set[str]] = {}
    unknown = 0
    for v in store.chunk_versions(list(sources)) if sources else []:
        if not v.changed_at:
            unknown += 1
            continue
        day = v.changed_at[:10]
        chunks[day] += 1
        documents.setdefault(day, set()).add(v.source)
    days = sorted(chunks, reverse=True)[:HISTORY_DAYS]
    stamp = store.stamp()
    return {
        "days": [{"day": d, "chunks": chunks[d], "documents": len(documents[d])} for d in days],
        "unrecorded": unknown,
        "model": stamp.describe() if stamp else None,
        "documents": len(sources),
    }
