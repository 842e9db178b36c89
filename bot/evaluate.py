"""The eval harness: Recall@k, MRR and refusal accuracy on a labelled JSONL set.

An item is {"id","kind","question","must_contain":[…]} (optionally "split": dev or
heldout). A hit is a retrieved chunk whose text contains one of the must_contain
strings; an empty list means the right outcome is a refusal.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bot.turn import Gate
from search.errors import ConfigError
from search.retrieve import Retrieval, Retriever

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
            item = Item(str(raw["id"]), str(raw["kind"]), str(raw["question"]),
                        tuple(raw["must_contain"]), str(raw.get("split", "dev")))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{path} line {n}: not a labelled item ({exc}); expected "
                '{"id","kind","question","must_contain":[...]}') from exc
        if split == "all" or item.split == split:
            items.append(item)
    return items


@dataclass
class Outcome:
    item: Item
    ranks: list[int]  # 1-based ranks of the relevant hits
    refused: bool
    retrieval: Retrieval

    @property
    def first(self) -> int | None:
        return self.ranks[0] if self.ranks else None

    def correct_refusal(self) -> bool:
        return self.refused != self.item.answerable


@dataclass
class Figures:
    n: int = 0
    answerable: int = 0
    r1: float = 0.0
    r5: float = 0.0
    mrr: float = 0.0
    refusal_accuracy: float = 0.0
    false_refusals: int = 0
    missed_refusals: int = 0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "n": self.n, "answerable": self.answerable, "recall@1": round(self.r1, 4),
            "recall@5": round(self.r5, 4), "mrr": round(self.mrr, 4),
            "refusal_accuracy": round(self.refusal_accuracy, 4),
            "false_refusals": self.false_refusals, "missed_refusals": self.missed_refusals,
        }


def run_item(item: Item, retriever: Retriever, gate: Gate, mode: str) -> Outcome:
    retrieval = retriever.retrieve(item.question, mode=mode, top_k=TOP_HITS)
    ranks = [
        i + 1 for i, h in enumerate(retrieval.hits)
        if any(s in h.chunk.text for s in item.must_contain)
    ]
    refused = gate.refuse(retrieval.support) is not None if retrieval.hits else True
    return Outcome(item, ranks, refused, retrieval)


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
    f.false_refusals = sum(1 for o in answerable if o.refused)
    f.missed_refusals = sum(1 for o in outcomes if not o.item.answerable and not o.refused)
    return f


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
    return {
        "id": o.item.id, "kind": o.item.kind, "split": o.item.split,
        "hits": [{"chunk_id": h.chunk.chunk_id, "text": h.chunk.text} for h in o.retrieval.hits[:TOP_HITS]],
        "refused": o.refused, "first_relevant_rank": o.first,
        "support": {"dense_top": o.retrieval.support.dense_top, "coverage": o.retrieval.support.coverage,
                    "addressed": o.retrieval.support.addressed},
    }
