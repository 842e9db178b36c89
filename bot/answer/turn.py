"""One grounded turn: condense, retrieve, gate, compose, check, render, log.

Refusal is earned: the gate refuses before composing when retrieval found no adequate
support, and the composer (a model) may also decline. Both are recorded with a reason.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import structlog

from bot.answer.checks import ClaimJudge, check_answer, flag_inline
from bot.answer.compose import Composer, Composition, streams
from bot.answer.condense import condense
from bot.answer.gate import CLOSEST, CLOSEST_LABEL, REFUSED, Gate, Verdict
from bot.answer.passages import Passage, cited_under, numbered, with_windows
from bot.answer.record import TurnRecord, error_text, failure_text, new_turn_id, pack_vector
from bot.answer.release import SentenceRelease, Sink
from bot.memory.redis import RedisUnavailable
from bot.memory.state import ConversationState, PriorTurn
from bot.memory.turnlog import TurnLog
from bot.metrics import BACKEND_ERRORS, FAILED_CHECKS, STAGE_SECONDS, TURNS
from search import links
from search.errors import CitebotError, SearchBackendError, StoreError
from search.retrieve import Retrieval, Retriever
from search.scope import Scope
from search.text import words
from search.types import Chunk, text_hash

log = structlog.get_logger("citebot.turn")


def refusal_text(reason: str, retrieval: Retrieval) -> str:
    lines = ["The collection does not cover this question, so I won't answer it from general knowledge.", f"({reason})"]
    if retrieval.hits:
        lines.append("Nearest passages:")
        for h in retrieval.hits[:3]:
            where = " > ".join(h.chunk.heading_path) or h.chunk.source
            page = f", p. {h.chunk.page}" if h.chunk.page else ""
            lines.append(f"• {h.chunk.source} — {where}{page}")
    return "\n".join(lines)


class Answerer:
    """Runs turns; the components are built once by the entry point and handed in."""

    def __init__(
        self,
        retriever: Retriever,
        composer: Composer,
        turnlog: TurnLog,
        state: ConversationState,
        *,
        passages: int = 5,
        gate: Gate | None = None,
        condenser: Any = None,
        claim_judge: ClaimJudge | None = None,
        source_url: str | None = None,
    ) -> None:
        self.retriever = retriever
        self.source_url = source_url  # CITEBOT_SOURCE_URL, for sources without an address
        self.composer = composer
        self.turnlog = turnlog
        self.state = state
        self.passage_count = passages
        self.gate = gate or Gate()
        self.condenser = condenser
        self.claim_judge = claim_judge

    def ask(
        self,
        question: str,
        *,
        thread_key: str | None = None,
        user: str | None = None,
        channel: str | None = None,
        surface: str = "cli",
        turn_id: str | None = None,
        scope: Scope | None = None,
        release: Sink | None = None,
    ) -> TurnRecord:
        """One turn; under `scope` (a channel's), only passages the scope allows are
        retrieved, shown or given to the composer. With `release`, a composer that streams
        hands it each sentence once checked (bot.answer.release); the record is the same."""
        return self.turn(
            question,
            thread_key=thread_key,
            user=user,
            channel=channel,
            surface=surface,
            turn_id=turn_id,
            scope=scope,
            release=release,
        )[0]

    def turn(
        self,
        question: str,
        *,
        thread_key: str | None = None,
        user: str | None = None,
        channel: str | None = None,
        surface: str = "cli",
        turn_id: str | None = None,
        scope: Scope | None = None,
        release: Sink | None = None,
    ) -> tuple[TurnRecord, Retrieval | None]:
        """`ask`, with the turn's retrieval (None when the turn failed before it had one):
        the eval harness judges its ranks on it rather than retrieving again."""
        started = time.perf_counter()
        held: list[Retrieval] = []
        record = new_record(question, turn_id=turn_id, user=user, channel=channel, thread=thread_key, surface=surface)
        if scope is not None:
            record.scope = {"name": scope.name, "sources": list(scope.globs)}
        structlog.contextvars.bind_contextvars(turn_id=record.turn_id)
        try:
            self._run(record, thread_key, scope, release, held)
        except Exception as exc:  # noqa: BLE001 - the edge of a turn: record it, say it
            fail(record, exc)
        record.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 2)
        log_turn(self.turnlog, record)
        structlog.contextvars.unbind_contextvars("turn_id")
        return record, (held[0] if held else None)

    def _run(
        self,
        record: TurnRecord,
        thread_key: str | None,
        scope: Scope | None,
        release: Sink | None,
        held: list[Retrieval],
    ) -> None:
        history = self._history(record, thread_key)
        t = time.perf_counter()
        if self.condenser is not None and history:
            record.condensed_query = self.condenser(record.question, history)
        else:
            record.condensed_query = condense(record.question, history)
        record.timings_ms["condense"] = round((time.perf_counter() - t) * 1000, 2)

        retrieval = self.retriever.retrieve(record.condensed_query, scope=scope)
        held.append(retrieval)
        _record_retrieval(record, retrieval)
        verdict = (
            self.gate.judge(retrieval.support) if retrieval.hits else Verdict(REFUSED, "the store returned no passages")
        )
        if verdict.outcome == REFUSED:
            record.refused, record.outcome = True, REFUSED
            record.refusal_reason = verdict.reason
            record.refusal_stage = "gate"
            record.answer = record.raw_answer = refusal_text(verdict.reason or "", retrieval)
            record.composer = "gate"
            self._remember(record, thread_key)
            return
        closest = verdict.outcome == CLOSEST
        if closest:
            record.outcome, record.closest_reason = CLOSEST, verdict.reason

        self._finish(retrieval)
        record.timings_ms.update({f"retrieve_{k}": v for k, v in retrieval.timings_ms.items()})
        passages = self.passages(record, retrieval)
        record.passages = [
            {
                "number": p.number,
                "chunk_id": p.chunk.chunk_id,
                "source": p.chunk.source,
                "heading_path": list(p.chunk.heading_path),
                "page": p.chunk.page,
                "chars": len(p.text),
                "superseded": p.chunk.superseded,
                "url": self._link(p.chunk),
                "text_hash": text_hash(p.chunk.text),
            }  # to tell later whether it changed (bot/owners/stale.py)
            for p in passages
        ]
        glossary = self.retriever.glossary
        t = time.perf_counter()
        compose_args = (
            record.condensed_query,
            passages,
            glossary.definitions_for(record.condensed_query),
            retrieval.expansions,
        )
        releaser = None
        composer = self.composer
        if release is not None and streams(composer) and self.claim_judge is None:
            sink = labelled(release) if closest else release
            releaser = SentenceRelease(sink, *_grounds(passages, retrieval), started=t)
            comp: Composition = composer.compose(*compose_args, on_text=releaser.feed, closest=closest)
        else:
            comp = self.composer.compose(*compose_args, closest=closest)
        record.timings_ms["compose"] = round((time.perf_counter() - t) * 1000, 2)
        if releaser is not None and releaser.first_ms is not None:
            record.timings_ms["first_sentence"] = releaser.first_ms
        record.timings_ms.update({f"compose_{k}": v for k, v in comp.timings_ms.items()})
        record.composer, record.model, record.label = comp.composer, comp.model, comp.label
        record.usage, record.prompt_chars = comp.usage, comp.prompt_chars
        record.errors = [*record.errors, *comp.errors]  # a state read failure comes first
        record.raw_answer = comp.text
        if comp.refused:
            record.refused, record.outcome = True, REFUSED
            record.refusal_reason = comp.refusal_reason or "the composer declined"
            record.refusal_stage = "model" if comp.model else comp.composer
            record.answer = refusal_text(record.refusal_reason, retrieval)
            self._remember(record, thread_key)
            return
        self._check(record, comp.text, passages, retrieval)
        if closest:
            record.answer = f"{CLOSEST_LABEL}\n{record.answer}"
        self._remember(record, thread_key)

    def _link(self, chunk: Chunk, where: tuple[tuple[str, ...], str | None] | None = None) -> str | None:
        """Where a person opens this passage (search/links.py), as recorded and shown: at the
        anchor of `where` when given (the section a quotation stands in), else the chunk's."""
        anchor = chunk.anchor if where is None else where[1]
        return links.link_for(chunk.source, chunk.url, anchor, self.source_url)

    def _check(self, record: TurnRecord, text: str, passages: list[Passage], retrieval: Retrieval) -> None:
        t = time.perf_counter()
        by_number = {p.number: p for p in passages}
        report = check_answer(text, *_grounds(passages, retrieval))
        record.timings_ms["checks"] = round((time.perf_counter() - t) * 1000, 2)
        # Only what a model wrote is judged: an extractive answer is the passages' own words.
        if self.claim_judge is not None and record.model is not None:
            t = time.perf_counter()
            judged = self.claim_judge.judge(text, {p.number: p.text for p in passages})
            report.claims = judged.claims
            record.claims = judged.as_dict()
            record.timings_ms["claims"] = round((time.perf_counter() - t) * 1000, 2)
        # A passage that joins short sections is cited under the one its quotations stand in.
        where = {
            p.number: cited_under(p.chunk, [q.text for q in report.quotes if q.verified and q.number == p.number])
            for p in passages
        }
        for entry in record.passages:
            n = entry["number"]
            if n in where and where[n] != (by_number[n].chunk.heading_path, by_number[n].chunk.anchor):
                entry["heading_path"] = list(where[n][0])
                entry["url"] = self._link(by_number[n].chunk, where[n])
        record.citations = [
            {
                "marker": c.marker,
                "chunk_id": c.chunk_id,
                "source": by_number[c.number].chunk.source if c.number in by_number else None,
                "heading_path": list(where[c.number][0]) if c.number in by_number else [],
                "page": by_number[c.number].chunk.page if c.number in by_number else None,
                "url": self._link(by_number[c.number].chunk, where[c.number]) if c.number in by_number else None,
                "resolved": c.resolved,
                "retrieved": c.retrieved,
            }
            for c in report.citations
        ]
        record.quotes = [
            {
                "text": q.text,
                "chunk_id": q.chunk_id,
                "verified": q.verified,
                "marker": f"[{q.number}]",
                "reason": q.reason,
            }
            for q in report.quotes
        ]
        answer = flag_inline(text, report)
        if report.valid_citations == 0:
            record.unsupported = True
            answer = (
                "⚠️ Unsupported: this answer cites no passage that was given, so it is not shown as an answer.\n\n"
                + answer
            )
        record.answer = answer

    def retrieve(self, query: str, scope: Scope | None = None) -> Retrieval:
        """A turn's retrieval, finished for the answer (search/retrieval.py): the passages
        to give, widened at a boundary, with their window scores when the composer reads
        them (benchmarks that time or replay composing retrieve through here too)."""
        retrieval = self.retriever.retrieve(query, scope=scope)
        self._finish(retrieval)
        return retrieval

    def _finish(self, retrieval: Retrieval) -> None:
        """The passages to give, with their window scores when the composer reads them."""
        self.retriever.finish(
            retrieval, self.passage_count, windows=bool(getattr(self.composer, "reads_windows", False))
        )

    def passages(self, record: TurnRecord, retrieval: Retrieval) -> list[Passage]:
        """What the composer is given, from the retrieval: its passages numbered, with their
        window scores when the composer reads them. When the store could not give those,
        the passages as they are: the sentences are chosen without knowing where in a
        passage the question's meaning lies, and the record says so."""
        passages = numbered(retrieval.passages)
        if not getattr(self.composer, "reads_windows", False):
            return passages
        record.timings_ms["windows"] = retrieval.timings_ms.get("windows", 0.0)
        if retrieval.windows_error is not None:
            reason = error_text(retrieval.windows_error)
            record.errors.append(f"window scores read failed: {reason}; sentences chosen without them")
            log.warning("window_scores_unreadable", error=reason)
            return passages
        return with_windows(passages, retrieval.windows or {})

    def _history(self, record: TurnRecord, thread_key: str | None) -> list[PriorTurn]:
        """The thread's earlier turns; when the state cannot be read (Redis down), none: the
        question is answered on its own words, and the record says so."""
        if not thread_key:
            return []
        try:
            return self.state.history(thread_key)
        except CitebotError as exc:
            record.errors.append(
                f"conversation state read failed: {error_text(exc)}; answered without the thread's earlier turns"
            )
            log.warning("conversation_state_unreadable", error=error_text(exc))
            return []

    def _remember(self, record: TurnRecord, thread_key: str | None) -> None:
        """The turn as context for the thread's next question; a failed write costs the
        follow-up its context, never this turn its answer."""
        if not thread_key:
            return
        try:
            self.state.append(
                thread_key, PriorTurn(record.turn_id, record.question, record.condensed_query, record.raw_answer)
            )
        except Exception as exc:  # noqa: BLE001 - the answer is checked and ready: keep it
            record.errors.append(f"conversation state write failed: {error_text(exc)}")
            log.error("conversation_state_failed", error=error_text(exc))


def _record_retrieval(record: TurnRecord, retrieval: Retrieval) -> None:
    """What the turn log keeps of the retrieval: its timings, candidates, support signals,
    the question's vector, glossary expansions, typo fixes and addresses."""
    record.timings_ms.update({f"retrieve_{k}": v for k, v in retrieval.timings_ms.items()})
    record.candidates = [
        {
            "chunk_id": h.chunk.chunk_id,
            "source": h.chunk.source,
            "score": h.score,
            "dense_rank": h.dense_rank,
            "lexical_rank": h.lexical_rank,
            "reasons": h.reasons,
        }
        for h in retrieval.hits
    ]
    record.support = asdict(retrieval.support)
    if retrieval.query_vector is not None:
        record.question_vector = pack_vector(retrieval.query_vector)
    record.expansions = [{"found": e.found, "expands_to": e.expands_to} for e in retrieval.expansions]
    record.corrections = retrieval.corrections
    record.addresses = retrieval.addresses


def labelled(release: Sink) -> Sink:
    """A sink that opens a "closest" answer with its label, before its first sentence."""
    opened: list[bool] = []

    def sink(piece: str) -> None:
        if not opened:
            release(f"{CLOSEST_LABEL}\n")
            opened.append(True)
        release(piece)

    return sink


def _grounds(passages: list[Passage], retrieval: Retrieval) -> tuple[dict[int, tuple[str, str]], set[str]]:
    """What the checks hold an answer to: the passages given (N -> chunk id, text) and every
    chunk retrieved this turn (the ranked hits and the neighbours widening added to them)."""
    given = {p.number: (p.chunk.chunk_id, p.text) for p in passages}
    return given, {h.chunk.chunk_id for h in retrieval.hits} | {p.chunk.chunk_id for p in passages}


def new_record(
    question: str,
    *,
    turn_id: str | None = None,
    user: str | None = None,
    channel: str | None = None,
    thread: str | None = None,
    surface: str = "cli",
) -> TurnRecord:
    return TurnRecord(
        turn_id=turn_id or new_turn_id(),
        created_at=datetime.now(UTC).isoformat(),
        question=question,
        condensed_query=question,
        user=user,
        channel=channel,
        thread=thread,
        surface=surface,
    )


def fail(record: TurnRecord, exc: BaseException) -> None:
    """The one failure path: the error recorded, the person told, a trace for a bug."""
    record.error, record.outcome = error_text(exc), "error"
    record.answer = failure_text(exc, record.turn_id)
    if isinstance(exc, (StoreError, SearchBackendError)) and not isinstance(exc, RedisUnavailable):
        BACKEND_ERRORS.labels("search").inc()  # Redis counts its own (bot.memory.redis)
    if not isinstance(exc, CitebotError):  # ours carry their reason; anything else is a bug
        log.error("turn_failed", error=record.error, exc_info=exc)


def failed_turn(turnlog: TurnLog, question: str, exc: BaseException, **where: Any) -> TurnRecord:
    """A turn that could not even start (no store, no model): recorded, logged and shown
    exactly like one that failed inside the pipeline."""
    record = new_record(question, **where)
    fail(record, exc)
    log_turn(turnlog, record)
    return record


def log_turn(turnlog: TurnLog, record: TurnRecord) -> None:
    """Write the record to the turn log and emit the one log line of the turn."""
    try:
        turnlog.put_turn(record.turn_id, record.created_at, record.as_dict())
    except Exception as exc:  # noqa: BLE001 - a lost log record must not lose the answer
        record.errors.append(f"turn log write failed: {error_text(exc)}")
        log.error("turn_log_failed", error=error_text(exc))
    count_turn(record)
    log.info(
        "turn",
        question_words=len(words(record.question)),
        surface=record.surface,
        user=record.user,
        channel=record.channel,
        refused=record.refused,
        outcome=record.outcome,
        refusal_reason=record.refusal_reason,
        refusal_stage=record.refusal_stage,
        composer=record.composer,
        model=record.model,
        citations=len(record.citations),
        failed_checks=sum(1 for q in record.quotes if not q["verified"])
        + sum(1 for c in record.citations if not (c["resolved"] and c["retrieved"])),
        passages=[p["chunk_id"] for p in record.passages],
        error=record.error,
        errors=record.errors,
        timings_ms=record.timings_ms,
    )


def count_turn(record: TurnRecord) -> None:
    """The turn's outcome, stage times and failed checks, into the metrics."""
    if record.error:
        outcome = "error"
    elif record.refused:
        outcome = "refused_gate" if record.composer == "gate" else "refused_model"
    elif record.outcome == CLOSEST:
        outcome = "closest"
    else:
        outcome = "answered"
    TURNS.labels(outcome).inc()
    for stage, key in (
        ("retrieve", "retrieve_total"),
        ("compose", "compose"),
        ("checks", "checks"),
        ("total", "total"),
    ):
        if key in record.timings_ms:
            STAGE_SECONDS.labels(stage).observe(record.timings_ms[key] / 1000)
    quotes = sum(1 for q in record.quotes if not q["verified"])
    citations = sum(1 for c in record.citations if not (c["resolved"] and c["retrieved"]))
    claims = int(record.claims.get("unsupported") or 0) if record.claims else 0
    for kind, n in (("quote", quotes), ("citation", citations), ("claim", claims)):
        if n:
            FAILED_CHECKS.labels(kind).inc(n)
