"""The gaps report: what citebot could not answer well, grouped into topics, for the
people who own the documents (`citebot gaps`; the JSON contract is in docs/contracts.md).

From the turn log of the period (and of the period of the same length before it, for the
change): the turns with an outcome (bot/owners/outcome.py) are grouped by their question
into topics (bot/owners/cluster.py, with the encoder citebot retrieves with, at the
threshold of the store's model: cluster.threshold_for). Each topic
says how many questions, askers and channels, three example questions verbatim (those
nearest the topic's centre), the documents and headings nearest to it (from the turns'
recorded passages and candidates: where an owner would write the answer), and the change
against the previous period. Topics asked by more people come first, then larger ones,
so a fact many are missing ranks above a stray question. Beside them, the period's
stale citations (bot/owners/stale.py).

With channels, only those channels' turns are read and only sources the channel's scope
may read are named. User ids appear only when asked for (`with_users`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from bot.answer.record import unpack_vector
from bot.owners.cluster import cluster, threshold_for
from bot.owners.outcome import outcome_of
from bot.owners.stale import stale_citations
from search.scope import Scope
from search.store import Store

EXAMPLES = 3  # example questions per topic
NEAREST = 3  # nearest documents per topic
CANDIDATES_PER_TURN = 3  # a turn's top candidates that vote for its topic's nearest documents
_PERIOD = re.compile(r"^\s*(\d+)\s*([hdw])\s*$")
_UNIT_S = {"h": 3600, "d": 86400, "w": 7 * 86400}

Encode = Callable[[Sequence[str]], np.ndarray]
ScopeOf = Callable[[str | None], Scope | None]  # a channel's scope; None: every source


def parse_period(text: str) -> timedelta:
    """ "7d", "24h", "2w" -> the period; ValueError with what is accepted otherwise."""
    m = _PERIOD.match(text or "")
    if not m or int(m.group(1)) == 0:
        raise ValueError(f"{text!r} is not a period: use a number of hours, days or weeks, e.g. 24h, 7d, 2w")
    return timedelta(seconds=int(m.group(1)) * _UNIT_S[m.group(2)])


@dataclass
class _Flagged:
    record: dict[str, Any]
    outcome: str
    current: bool


def _norm(question: str) -> str:
    return " ".join(question.casefold().split())


def _nearest(members: Sequence[_Flagged], headings: dict[str, list[str]], scope_of: ScopeOf) -> list[dict[str, Any]]:
    """The documents and headings the topic's turns came nearest to, by rank-weighted votes."""
    votes: dict[tuple[str, tuple[str, ...]], float] = {}
    for m in members:
        scope = scope_of(m.record.get("channel"))
        passages = m.record.get("passages") or []
        shown = passages or m.record.get("candidates") or []
        for rank, p in enumerate(shown[:CANDIDATES_PER_TURN]):
            source = p.get("source")
            if not source or (scope is not None and not scope.allows(source)):
                continue
            heading = tuple(p.get("heading_path") or headings.get(p.get("chunk_id") or "", []))
            votes[(source, heading)] = votes.get((source, heading), 0.0) + 1.0 / (rank + 1)
    ranked = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"source": s, "heading_path": list(h)} for (s, h), _ in ranked[:NEAREST]]


def _headings(store: Store, flagged: Sequence[_Flagged]) -> dict[str, list[str]]:
    """Heading paths of the candidates that were recorded without one (refused turns)."""
    ids = sorted(
        {
            c.get("chunk_id")
            for f in flagged
            if not f.record.get("passages")
            for c in (f.record.get("candidates") or [])[:CANDIDATES_PER_TURN]
            if c.get("chunk_id")
        }
    )
    return {
        c.chunk_id: list(c.heading_path) for n in range(0, len(ids), 500) for c in store.get_chunks(ids[n : n + 500])
    }


def _examples(members: Sequence[_Flagged], vectors: dict[str, np.ndarray], with_users: bool) -> list[dict[str, Any]]:
    """Up to EXAMPLES distinct questions of the period, nearest the topic's centre first."""
    current = [m for m in members if m.current]
    centre = np.sum([vectors[_norm(m.record["question"])] for m in current], axis=0)
    seen: set[str] = set()
    out = []
    order = sorted(current, key=lambda m: -float(vectors[_norm(m.record["question"])] @ centre))
    for m in order:
        key = _norm(m.record["question"])
        if key in seen:
            continue
        seen.add(key)
        item = {"turn_id": m.record.get("turn_id"), "question": m.record["question"], "outcome": m.outcome}
        if with_users:
            item["user"] = m.record.get("user")
        out.append(item)
        if len(out) == EXAMPLES:
            break
    return out


def _vectors(
    flagged: Sequence[_Flagged], distinct: Sequence[str], encode: Encode, dims: int | None
) -> dict[str, np.ndarray]:
    """Each distinct question's vector: the one its turn recorded when searched (of the
    encoder's width `dims`), else encoded now (turns from before it was recorded)."""
    out: dict[str, np.ndarray] = {}
    if dims:
        for f in flagged:
            key = _norm(f.record["question"])
            if key not in out and (v := unpack_vector(f.record.get("question_vector"), dims)) is not None:
                out[key] = v
    missing = [q for q in distinct if q not in out]
    if missing:
        out.update(zip(missing, np.asarray(encode(missing), np.float32), strict=True))
    return out


def build_report(
    turnlog: Any,
    store: Store,
    encode: Encode,
    *,
    period: timedelta,
    channels: Sequence[str] = (),
    scope_of: ScopeOf = lambda _c: None,
    with_users: bool = False,
    now: datetime | None = None,
    threshold: float | None = None,
    dims: int | None = None,
) -> dict[str, Any]:
    """The report: the JSON contract's fields (contract() keeps only those), the period and
    each topic's turn ids ("_turn_ids"). The questions are clustered at `threshold`, by
    default the one of the model the store was built with (its index stamp)."""
    if threshold is None:
        stamp = store.stamp()
        threshold = threshold_for(stamp.name if stamp else None)
    now = now or datetime.now(UTC)
    since = now - period
    records = [
        r for r in turnlog.turns_since((since - period).isoformat()) if not channels or r.get("channel") in channels
    ]
    flagged = [
        _Flagged(r, o, str(r.get("created_at") or "") >= since.isoformat())
        for r in records
        if r.get("question") and (o := outcome_of(r))
    ]
    distinct = sorted({_norm(f.record["question"]) for f in flagged})
    vectors = _vectors(flagged, distinct, encode, dims)
    matrix = np.stack([vectors[q] for q in distinct]) if distinct else np.zeros((0, 1), np.float32)
    labels = dict(zip(distinct, cluster(matrix, threshold).tolist(), strict=True))
    by_topic: dict[int, list[_Flagged]] = {}
    for f in flagged:
        by_topic.setdefault(labels[_norm(f.record["question"])], []).append(f)
    headings = _headings(store, flagged)
    topics = []
    for members in by_topic.values():
        current = [m for m in members if m.current]
        if not current:
            continue
        topic: dict[str, Any] = {
            "size": len(current),
            "askers": len({m.record.get("user") for m in current if m.record.get("user")}),
            "channels": len({m.record.get("channel") for m in current if m.record.get("channel")}),
            "questions": _examples(members, vectors, with_users),
            "nearest": _nearest(members, headings, scope_of),
            "change": len(current) - (len(members) - len(current)),
            "_turn_ids": [m.record.get("turn_id") for m in current],  # not in the contract
        }
        if with_users:
            topic["users"] = sorted({m.record["user"] for m in current if m.record.get("user")})
        topics.append(topic)
    topics.sort(key=lambda t: (-t["askers"], -t["size"], -t["channels"], -t["change"]))
    current_records = [r for r in records if str(r.get("created_at") or "") >= since.isoformat()]

    def allows(record: dict[str, Any], source: str) -> bool:
        scope = scope_of(record.get("channel"))
        return scope is None or scope.allows(source)

    stale = [
        {"turn_id": s.turn_id, "chunk_id": s.chunk_id, "source": s.source}
        for s in stale_citations(store, current_records, allows)
    ]
    return {
        "topics": topics,
        "stale": stale,
        "period": {"since": since.isoformat(), "until": now.isoformat(), "turns": len(current_records)},
    }


def contract(report: dict[str, Any]) -> dict[str, Any]:
    """The report as `citebot gaps --json` prints it (docs/contracts.md)."""
    topics = [{k: v for k, v in t.items() if not k.startswith("_")} for t in report["topics"]]
    return {"topics": topics, "stale": report["stale"]}
