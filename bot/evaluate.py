"""The eval harness: Recall@k, MRR and refusal accuracy on a labelled JSONL set, and
with answers on, what the whole turn quoted.

An item is {"id","kind","question","must_contain":[…]} (optionally "split": dev or
heldout). A hit is a retrieved chunk whose text contains one of the must_contain
strings; an empty list means the right outcome is a refusal.

Answers (`citebot eval --answers`): each item runs as one whole turn in a fresh thread.
A label is *given* when a passage given to the composer holds a must_contain string, and
*quoted* when a quotation of the answer overlaps one (see `overlaps`).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from bot.answer.checks import normalise
from bot.answer.gate import ANSWER, CLOSEST, REFUSED, Gate
from bot.answer.record import TurnRecord
from bot.answer.turn import Answerer
from search.errors import ConfigError
from search.retrieval_config import RetrievalConfig
from search.retrieve import Retrieval, Retriever
from search.text import W_CLASS

TOP_HITS = 10


@dataclass(frozen=True)
class Item:
    id: str
    kind: str
    question: str
    must_contain: tuple[str, ...]
    split: str = "dev"

    @property
    def answerable(self) -> bool:
        return bool(self.must_contain)


def load_items(path: Path, split: str = "all") -> list[Item]:
    items: list[Item] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the labelled set {path}: {exc.strerror or exc}") from exc
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            item = Item(
                str(raw["id"]),
                str(raw["kind"]),
                str(raw["question"]),
                tuple(raw["must_contain"]),
                str(raw.get("split", "dev")),
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{path} line {n}: not a labelled item ({exc}); expected "
                '{"id","kind","question","must_contain":[...]}'
            ) from exc
        if split == "all" or item.split == split:
            items.append(item)
    return items


@dataclass
class Answered:
    """What one whole turn answered for an item (`citebot eval --answers`)."""

    answer: str
    refused: bool
    quotes: list[str]  # the quoted texts, in answer order
    passages: list[str]  # chunk ids given to the composer, in passage order
    label_given: bool  # a passage given holds a must_contain string
    label_quoted: bool  # a quotation overlaps a must_contain string
    error: str | None = None
    compose_ms: float | None = None


@dataclass
class Outcome:
    item: Item
    ranks: list[int]  # 1-based ranks of the relevant hits
    outcome: str  # the gate's (or the turn's): "answer", "closest" or "refused" (bot.answer.gate)
    retrieval: Retrieval
    answered: Answered | None = None

    @property
    def first(self) -> int | None:
        return self.ranks[0] if self.ranks else None

    @property
    def refused(self) -> bool:
        """Refused flatly ("closest" is no refusal: it is answered, labelled)."""
        return self.outcome == REFUSED

    def correct_refusal(self) -> bool:
        """An answerable question not refused flatly; an unanswerable one not answered
        outright (refused, or labelled as the closest the documents come)."""
        return not self.refused if self.item.answerable else self.outcome != ANSWER


@dataclass
class Figures:
    n: int = 0
    answerable: int = 0
    r1: float = 0.0
    r5: float = 0.0
    mrr: float = 0.0
    refusal_accuracy: float = 0.0
    false_refusals: int = 0  # answerable questions refused flatly
    missed_refusals: int = 0  # unanswerable questions answered outright
    refused_unanswerable: int = 0
    closest_answerable: int = 0  # answered as the closest the documents come, labelled
    closest_unanswerable: int = 0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "answerable": self.answerable,
            "recall@1": round(self.r1, 4),
            "recall@5": round(self.r5, 4),
            "mrr": round(self.mrr, 4),
            "refusal_accuracy": round(self.refusal_accuracy, 4),
            "false_refusals": self.false_refusals,
            "missed_refusals": self.missed_refusals,
            "refused_unanswerable": self.refused_unanswerable,
            "closest_answerable": self.closest_answerable,
            "closest_unanswerable": self.closest_unanswerable,
            **self.extra,
        }


def run_item(item: Item, retriever: Retriever, gate: Gate, mode: str | None = None) -> Outcome:
    return judged(item, retriever.retrieve(item.question, mode=mode, top_k=TOP_HITS), gate)


def judged(item: Item, retrieval: Retrieval, gate: Gate) -> Outcome:
    """An item's ranks and the gate's outcome, on a retrieval of its question."""
    ranks = [i + 1 for i, h in enumerate(retrieval.hits) if any(s in h.chunk.text for s in item.must_contain)]
    outcome = gate.judge(retrieval.support).outcome if retrieval.hits else REFUSED
    return Outcome(item, ranks, outcome, retrieval)


def figures(outcomes: Iterable[Outcome]) -> Figures:
    outcomes = list(outcomes)
    f = Figures(n=len(outcomes))
    answerable = [o for o in outcomes if o.item.answerable]
    f.answerable = len(answerable)
    if answerable:
        f.r1 = sum(1 for o in answerable if o.first == 1) / len(answerable)
        f.r5 = sum(1 for o in answerable if o.first is not None and o.first <= 5) / len(answerable)
        f.mrr = sum(1 / o.first for o in answerable if o.first) / len(answerable)
    if outcomes:
        f.refusal_accuracy = sum(1 for o in outcomes if o.correct_refusal()) / len(outcomes)
    unanswerable = [o for o in outcomes if not o.item.answerable]
    f.false_refusals = sum(1 for o in answerable if o.refused)
    f.missed_refusals = sum(1 for o in unanswerable if o.outcome == ANSWER)
    f.refused_unanswerable = sum(1 for o in unanswerable if o.refused)
    f.closest_answerable = sum(1 for o in answerable if o.outcome == CLOSEST)
    f.closest_unanswerable = sum(1 for o in unanswerable if o.outcome == CLOSEST)
    if outcomes and all(o.answered is not None for o in outcomes):
        f.extra = answer_figures(answerable)
    return f


def answer_figures(answerable: list[Outcome]) -> dict:
    """The answer-level figures over answerable items: how often the answer quotes a label
    (end to end), how often a label was given, and of those how often it was quoted."""
    quoted = sum(1 for o in answerable if o.answered and o.answered.label_quoted)
    given = [o for o in answerable if o.answered and o.answered.label_given]
    given_quoted = sum(1 for o in given if o.answered and o.answered.label_quoted)
    n = len(answerable)
    return {
        "answer_quotes_label": quoted,
        "label_given": len(given),
        "label_given_not_quoted": len(given) - given_quoted,
        "quotes_label_rate": round(quoted / n, 4) if n else 0.0,
        "quoted_when_given_rate": round(given_quoted / len(given), 4) if given else 0.0,
    }


def summarise(outcomes: list[Outcome]) -> dict:
    """Overall, per split and per kind."""
    by_split: dict[str, list[Outcome]] = defaultdict(list)
    by_kind: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_split[o.item.split].append(o)
        by_kind[o.item.kind].append(o)
    return {
        "all": figures(outcomes).as_dict(),
        "by_split": {k: figures(v).as_dict() for k, v in sorted(by_split.items())},
        "by_kind": {k: figures(v).as_dict() for k, v in sorted(by_kind.items())},
    }


def outcome_json(o: Outcome) -> dict:
    out: dict[str, Any] = {
        "id": o.item.id,
        "kind": o.item.kind,
        "split": o.item.split,
        "hits": [{"chunk_id": h.chunk.chunk_id, "text": h.chunk.text} for h in o.retrieval.hits[:TOP_HITS]],
        "refused": o.refused,
        "outcome": o.outcome,
        "first_relevant_rank": o.first,
        "support": {
            "dense_top": o.retrieval.support.dense_top,
            "coverage": o.retrieval.support.coverage,
            "addressed": o.retrieval.support.addressed,
        },
    }
    if o.answered is not None:
        a = o.answered
        out.update(
            {
                "answer": a.answer,
                "quotes": a.quotes,
                "passages": a.passages,
                "label_given": a.label_given,
                "label_quoted": a.label_quoted,
                "error": a.error,
                "compose_ms": a.compose_ms,
            }
        )
    return out


# -- answers: the whole turn per item ----------------------------------------------------

# A word with the marks it holds (search.marks): "छुट्टी" one word, not three fragments.
_WORD = re.compile(W_CLASS + "+")
# A quotation overlaps a label when they share a run of consecutive words covering at
# least half the label's words and at least LABEL_OVERLAP_MIN_WORDS of them (the whole
# label when it is shorter): a label that spans two sentences is quoted by either, and a
# shared "the number of" is no overlap.
LABEL_OVERLAP_MIN_WORDS = 3


def _norm_words(text: str) -> list[str]:
    return _WORD.findall(normalise(text))


def overlaps(quote: str, label: str) -> bool:
    """Whether a quotation and a must_contain string share enough consecutive words."""
    q, lab = _norm_words(quote), _norm_words(label)
    if not q or not lab:
        return False
    need = min(len(lab), max(LABEL_OVERLAP_MIN_WORDS, math.ceil(len(lab) / 2)))
    # Longest common run of words, by dynamic programming over the two word lists.
    best, prev = 0, [0] * (len(lab) + 1)
    for w in q:
        cur = [0] * (len(lab) + 1)
        for j, v in enumerate(lab, start=1):
            if w == v:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best >= need


class MemoryTurnLog:
    """A turn log held in this process: eval turns never land in the user's turn log."""

    def __init__(self) -> None:
        self.turns: dict[str, dict] = {}

    def put_turn(self, turn_id: str, created_at: str, record: dict) -> None:
        self.turns[turn_id] = {**record, "turn_id": turn_id, "created_at": created_at}

    def get_turn(self, turn_id: str) -> dict | None:
        raw = self.turns.get(turn_id)
        return None if raw is None else {**raw, "feedback": []}

    def add_feedback(self, turn_id: str, at: str, user: str | None, value: str) -> None:
        raise NotImplementedError("eval turns take no feedback")

    def purge_turns(
        self, before: str | None, users: Sequence[str], limit: int | None = None, teams: Sequence[str] = ()
    ) -> list[dict]:
        doomed = [
            t
            for t in self.turns.values()
            if (before is not None and t["created_at"] < before) or t.get("user") in users or t.get("team") in teams
        ]
        for t in doomed[:limit]:
            del self.turns[t["turn_id"]]
        return [{k: t.get(k) for k in ("user", "channel", "thread")} for t in doomed[:limit]]

    def turns_since(self, since_iso: str) -> Iterator[dict]:
        held = sorted(self.turns.values(), key=lambda r: r["created_at"])
        return iter([{**r, "feedback": []} for r in held if r["created_at"] >= since_iso])


def answered(item: Item, record: TurnRecord, chunk_text: dict[str, str]) -> Answered:
    """An item's turn, judged against its labels; chunk_text maps each given chunk id to
    its text (the chunks the turn's retrieval gave)."""
    quotes = [q["text"] for q in record.quotes]
    passages = [p["chunk_id"] for p in record.passages]
    given = any(s in chunk_text.get(cid, "") for cid in passages for s in item.must_contain)
    quoted = any(overlaps(q, s) for q in quotes for s in item.must_contain)
    return Answered(
        record.answer, record.refused, quotes, passages, given, quoted, record.error, record.timings_ms.get("compose")
    )


def run_answer_item(
    item: Item, retriever: Retriever, answerer: Answerer, gate: Gate, mode: str | None = None
) -> Outcome:
    """The whole turn in a fresh thread, and retrieval figures as run_item on the turn's
    own retrieval (one per item) when it is the one run_item would make (same retriever,
    mode and depth), else on one of their own; the item counts as refused when the turn
    refused (by the gate or the composer) or failed, and as the turn's outcome otherwise
    ("closest" when it was labelled so)."""
    record, retrieval = answerer.turn(item.question, surface="eval")
    same = (
        answerer.retriever is retriever and mode in (None, retriever.config.mode) and retriever.config.top_k == TOP_HITS
    )
    outcome = judged(item, retrieval, gate) if retrieval is not None and same else run_item(item, retriever, gate, mode)
    texts = {c.chunk_id: c.text for c in retrieval.passages} if retrieval is not None else {}
    outcome.answered = answered(item, record, texts)
    outcome.outcome = REFUSED if record.refused or record.error is not None else record.outcome
    return outcome


# -- comparing two configurations ------------------------------------------------------

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20261130  # fixed, so a comparison prints the same interval every run

FEATURES = ("aliases", "typos", "rare", "phrase", "joined", "stems", "rerank", "widen")


def parse_config(spec: str, base: RetrievalConfig) -> tuple[str, RetrievalConfig]:
    """ "hybrid", "lexical+aliases", "hybrid-rare-phrase", "hybrid+rerank" -> a config.

    The first word is the mode; +feature / -feature switch features on or off.
    """
    import re
    from dataclasses import replace

    parts = re.split(r"(?=[+-])", spec.strip())
    mode = parts[0]
    if mode not in ("dense", "lexical", "hybrid"):
        raise ConfigError(f"configuration {spec!r} must start with dense, lexical or hybrid")
    cfg = replace(base, mode=mode)
    fields = {
        "aliases": "aliases",
        "typos": "typo_fix",
        "rare": "rare_rule",
        "phrase": "phrase_rule",
        "joined": "joined_rule",
        "stems": "stemming",
        "rerank": "rerank",
        "widen": "widen",
    }
    for part in parts[1:]:
        sign, name = part[0], part[1:]
        if name not in fields:
            raise ConfigError(f"unknown feature {name!r} in {spec!r}; known: {', '.join(FEATURES)}")
        change: dict[str, Any] = {fields[name]: sign == "+"}
        cfg = replace(cfg, **change)
    return mode, cfg


def per_item(outcomes: list[Outcome]) -> dict[str, np.ndarray]:
    """Per-item scores: each metric is the mean of one of these vectors."""
    answerable = [o for o in outcomes if o.item.answerable]
    return {
        "recall@1": np.array([1.0 if o.first == 1 else 0.0 for o in answerable]),
        "recall@5": np.array([1.0 if o.first is not None and o.first <= 5 else 0.0 for o in answerable]),
        "mrr": np.array([1.0 / o.first if o.first else 0.0 for o in answerable]),
        "refusal_accuracy": np.array([1.0 if o.correct_refusal() else 0.0 for o in outcomes]),
    }


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float, float]:
    """Mean of b - a and its 95% interval, resampling items (pairs) with replacement."""
    if len(a) != len(b):
        raise ValueError("paired bootstrap needs the same items on both sides")
    if len(a) == 0:
        return 0.0, 0.0, 0.0
    diff = b - a
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(lo), float(hi)


class MetricComparison(TypedDict):
    """One metric of `compare`: A's and B's means, B - A, and its 95% interval (JSON as is)."""

    a: float
    b: float
    diff: float
    ci95: list[float]


def compare(a: list[Outcome], b: list[Outcome]) -> dict[str, MetricComparison]:
    """Each metric for A and B, B - A, and its paired-bootstrap 95% interval."""
    va, vb = per_item(a), per_item(b)
    out: dict[str, MetricComparison] = {}
    for metric in va:
        diff, lo, hi = paired_bootstrap(va[metric], vb[metric])
        out[metric] = {
            "a": round(float(va[metric].mean()) if len(va[metric]) else 0.0, 4),
            "b": round(float(vb[metric].mean()) if len(vb[metric]) else 0.0, 4),
            "diff": round(diff, 4),
            "ci95": [round(lo, 4), round(hi, 4)],
        }
    return out
