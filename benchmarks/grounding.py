"""Grounding benchmark: adversarial answers classified by the checks, end to end.

Each case scripts what "the model" does (a correct quotation, typographic variants, an
invented quote, a citation to a passage not given, a quote from passage 2 cited as [1],
no citation, a refusal, malformed output, 429 then success, 500, 529, a timeout) on a
local stand-in for the Messages API. The real anthropic SDK talks to it; a real Answerer
(retrieval over the ingested sample handbook, the gate, the checks) runs the turn. The
table compares the expected classification with the one the turn record shows, flags
included only when they are also visible inline in the answer.

The claim judge runs on every answered case. By default its verdicts come from the
stand-in, which judges by word overlap (share of a sentence's content words found in the
passages it cites, >= JUDGE_OVERLAP_MIN): a heuristic, not a model. Its agreement with the
deterministic quote check measures the plumbing and the protocol, not Claude. With
--live-judge (ANTHROPIC_API_KEY set) the judge is the real model and the figure is real.

    .venv/bin/python -m benchmarks.grounding [--store DIR] [--live-judge] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from benchmarks.common import REPO
from bot.answer.checks import quote_in
from bot.answer.claude import CLAUDE, FALLBACK, Messages, ModelClaimJudge, build_client
from bot.answer.prompt import JUDGE_SYSTEM, REFUSAL_TOKEN
from bot.answer.record import TurnRecord
from bot.answer.sentences import split_sentences
from bot.answer.turn import Answerer
from bot.settings import load_settings
from bot.testing.anthropic_standin import (
    AnthropicStandIn,
    RecordedRequest,
    Reply,
    Script,
    error,
    message,
    passages_in,
    running,
)
from bot.wiring import Components
from ingest.embedder import Embedder
from ingest.pipeline import ingest
from search.embedded import EmbeddedStore
from search.text import content_words, words

QUESTION = "When does a Release Train depart, and what happens to changes that miss the cut-off?"
TARGET = ("Whatever is merged and has passed the checks by the cut-off boards that Train; "
          "whatever is not waits for the next one, two weeks later.")
INVENTED = "Trains depart every Friday at noon from platform nine."
# The stand-in judge: a sentence is "supported" when this share of its content words
# occurs in the passages it cites. A heuristic standing in for the model (see docstring).
JUDGE_OVERLAP_MIN = 0.8
FAKE_KEY = "sk-ant-standin-not-a-key"

VERIFIED = "verified"
INVENTED_QUOTE = "invented quote"
MIS_CITED = "mis-cited"
UNRESOLVED = "unresolved citation"
UNSUPPORTED = "unsupported"
MODEL_REFUSAL = "model refusal"
GATE_REFUSAL = "gate refusal"
FALLBACK_LABELLED = "labelled fallback"
FALLBACK_UNLABELLED = "UNLABELLED fallback"


def cite(request: RecordedRequest, words_: str = TARGET) -> int:
    """The passage holding these words, found as a model reading its prompt would."""
    found = [n for n, text in sorted(passages_in(request).items()) if words_ in text]
    if not found:
        raise SystemExit(f"retrieval no longer gives the passage holding {words_[:50]!r} for the "
                         "benchmark question: pick another TARGET")
    return found[0]


def writes(make: Callable[[RecordedRequest], str]) -> Script:
    return lambda request: message(make(request))


def from_passage_2_as_1(request: RecordedRequest) -> str:
    given = passages_in(request)
    sentence = next(s for s in split_sentences(given[2])
                    if len(s.split()) >= 6 and '"' not in s and "“" not in s and not quote_in(s, given[1]))
    return f'The handbook says "{sentence}" [1]'


@dataclass(frozen=True)
class Case:
    name: str
    expected: frozenset[str]
    replies: tuple[Script, ...] = ()
    always: Script | None = None
    settings: dict[str, Any] = field(default_factory=dict)


def q(variant: str) -> Script:
    return writes(lambda r: f"On the cut-off: {variant} [{cite(r)}].")


CASES = [
    Case("correct quotation", frozenset({VERIFIED}), (q(f'"{TARGET}"'),)),
    Case("variant: curly quotes", frozenset({VERIFIED}), (q(f"“{TARGET}”"),)),
    Case("variant: en dash", frozenset({VERIFIED}), (q(f'"{TARGET.replace("cut-off", "cut–off")}"'),)),
    Case("variant: em dash, spaced", frozenset({VERIFIED}),
         (q(f'"{TARGET.replace("cut-off", "cut — off")}"'),)),
    Case("variant: extra spaces, line break", frozenset({VERIFIED}),
         (q('"' + TARGET.replace(" ", "  ").replace("; ", ";\n") + '"'),)),
    Case('variant: "..." gap', frozenset({VERIFIED}),
         (q('"Whatever is merged and has passed the checks ... waits for the next one"'),)),
    Case('variant: "…" gap', frozenset({VERIFIED}), (q("“Whatever is merged … two weeks later.”"),)),
    Case("invented quote, correct citation", frozenset({INVENTED_QUOTE}),
         (writes(lambda r: f'"{TARGET}" [{cite(r)}] The guide adds: "{INVENTED}" [{cite(r)}]'),)),
    Case("citation to a passage not given", frozenset({UNRESOLVED}),
         (writes(lambda r: f'"{TARGET}" [{cite(r)}] Late changes ride the next Train '
                           f"[{max(passages_in(r)) + 3}]."),)),
    Case("only passages not given", frozenset({UNRESOLVED, UNSUPPORTED}),
         (writes(lambda r: f'"{TARGET}" [{max(passages_in(r)) + 1}]'),)),
    Case("quote from [2] cited as [1]", frozenset({MIS_CITED}), (writes(from_passage_2_as_1),)),
    Case("no citation at all", frozenset({UNSUPPORTED}),
         (message("Trains leave every second Tuesday and late work waits for the next one."),)),
    Case("model refusal", frozenset({MODEL_REFUSAL}),
         (message(f"{REFUSAL_TOKEN}: the passages give the timetable but not the question's answer."),)),
    Case("malformed: no text block", frozenset({FALLBACK_LABELLED}),
         (message(None, content=[{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]),)),
    Case("malformed: empty text", frozenset({FALLBACK_LABELLED}), (message(""),)),
    Case("429, retry-after 0.3 s, then success", frozenset({VERIFIED}),
         (error(429, "rate_limit_error", "slow down", {"retry-after": "0.3"}), q(f'"{TARGET}"'))),
    Case("500 until the budget ends", frozenset({FALLBACK_LABELLED}),
         always=error(500, "api_error", "internal"), settings={"anthropic_budget_s": 1.5}),
    Case("529 overloaded until the budget ends", frozenset({FALLBACK_LABELLED}),
         always=error(529, "overloaded_error", "Overloaded"), settings={"anthropic_budget_s": 1.5}),
    Case("timeout past the budget", frozenset({FALLBACK_LABELLED}),
         always=Reply(200, message("late").body, delay_s=5.0),
         settings={"anthropic_timeout_s": 0.4, "anthropic_budget_s": 1.0}),
    # Judge-only: no quotation, so the deterministic checks see a valid citation and nothing
    # more; only the claim judge can tell these two apart.
    Case("judge only: true paraphrase", frozenset({VERIFIED}),
         (writes(lambda r: f"Nobody holds a Train for a feature [{cite(r)}]."),)),
    Case("judge only: unquoted invention", frozenset({VERIFIED}),
         (writes(lambda r: f"Each Train is pulled by a steam locomotive from platform nine [{cite(r)}]."),)),
]


def standin_judge(request: RecordedRequest) -> Reply:
    """The word-overlap judge (not a model); token counts are estimates (chars / 4)."""
    m = re.search(r"<sentence>(.*?)</sentence>", request.user_text, re.DOTALL)
    sentence = m.group(1) if m else ""
    present = set(words(" ".join(passages_in(request).values())))
    own = content_words(sentence)
    missing = [w for w in own if w not in present]
    share = 1 - len(missing) / len(own) if own else 1.0
    text = "SUPPORTED" if share >= JUDGE_OVERLAP_MIN else (
        f"UNSUPPORTED: {len(missing)} of {len(own)} words are not in the passages ({', '.join(missing[:5])})")
    return message(text, input_tokens=(len(request.system) + len(request.user_text)) // 4,
                   output_tokens=max(1, len(text) // 4))


def classify(record: TurnRecord) -> tuple[frozenset[str], bool]:
    """What the turn record says happened, and whether every failed check is shown inline."""
    if record.composer == FALLBACK:
        labelled = bool(record.label and record.label.startswith("fallback:"))
        return frozenset({FALLBACK_LABELLED if labelled else FALLBACK_UNLABELLED}), labelled
    if record.refused:
        return frozenset({MODEL_REFUSAL if record.composer == CLAUDE else GATE_REFUSAL}), True
    got: set[str] = set()
    shown = True
    for quote in record.quotes:
        if quote["verified"]:
            continue
        reason = quote["reason"]
        got.add(MIS_CITED if reason.startswith("mis-cited") else
                UNRESOLVED if reason == "cites a passage that was not given" else INVENTED_QUOTE)
        shown &= f"⚠️ [quote check failed: {reason}]" in record.answer
    for citation in record.citations:
        if not citation["resolved"]:
            got.add(UNRESOLVED)
            shown &= f"{citation['marker']} ⚠️ [citation points to no passage given]" in record.answer
    if record.unsupported:
        got.add(UNSUPPORTED)
        shown &= record.answer.startswith("⚠️ Unsupported")
    return frozenset(got or {VERIFIED}), shown


def judge_pairs(record: TurnRecord) -> list[tuple[str, bool, bool | None]]:
    """(sentence, quote check passed, judge said supported) for sentences both looked at."""
    out = []
    for item in record.claims.get("items", []):
        quotes = [qq for qq in record.quotes
                  if qq["marker"] in item["markers"] and " ".join(qq["text"].split()) in item["sentence"]]
        if quotes:
            out.append((item["sentence"], all(qq["verified"] for qq in quotes), item["supported"]))
    return out


def open_store(store_dir: Path | None, embedder: Embedder) -> EmbeddedStore:
    if store_dir is not None:
        return EmbeddedStore(store_dir)
    target = Path(tempfile.mkdtemp(prefix="citebot-grounding-")) / "store"
    store = EmbeddedStore(target)
    cwd = os.getcwd()
    os.chdir(REPO)  # sources named relative to the repo, as users see them
    try:
        summary = ingest([REPO / "examples" / "handbook"], store, embedder, progress=False)
    finally:
        os.chdir(cwd)
    print(f"ingested examples/handbook: {summary.documents} documents, {summary.chunks} chunks "
          f"in {summary.seconds:.1f} s", file=sys.stderr)
    return store


def build(standin: AnthropicStandIn, store: EmbeddedStore, embedder: Embedder,
          live_judge: ModelClaimJudge | None, overrides: dict[str, Any]) -> Answerer:
    settings = load_settings(**{
        "anthropic_api_key": FAKE_KEY, "anthropic_base_url": standin.base_url,
        "anthropic_model": "claude-standin", "claim_judge": True, "store": store.directory,
        "glossary": REPO / "examples" / "glossary.csv", "anthropic_timeout_s": 5.0,
        "anthropic_budget_s": 10.0, **overrides})
    components = Components(settings)
    components.__dict__.update(store=store, embedder=embedder)
    answerer = components.answerer
    if live_judge is not None:
        answerer.claim_judge = live_judge
    return answerer


def live_claim_judge() -> ModelClaimJudge:
    settings = load_settings()  # the developer's environment: ANTHROPIC_API_KEY, model, budget
    if settings.anthropic_api_key is None:
        raise SystemExit("--live-judge needs ANTHROPIC_API_KEY")
    return ModelClaimJudge(Messages(build_client(settings), settings.anthropic_model,
                                    settings.anthropic_timeout_s, settings.anthropic_budget_s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, help="an ingested store of examples/handbook "
                        "(default: ingest one into a temporary directory)")
    parser.add_argument("--live-judge", action="store_true",
                        help="judge claims with the real model (needs ANTHROPIC_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))  # errors only

    judge = live_claim_judge() if args.live_judge else None
    embedder = Embedder()
    store = open_store(args.store, embedder)
    rows: list[dict[str, Any]] = []
    pairs: list[tuple[str, str, bool, bool | None]] = []
    judge_only: list[tuple[str, str, bool | None, str]] = []
    judge_cost: list[dict[str, Any]] = []
    with running() as standin:
        for case in CASES:
            standin.reset()
            standin.route(lambda r: r.system == JUDGE_SYSTEM, standin_judge)
            standin.script(*case.replies)
            standin.always(case.always)
            answerer = build(standin, store, embedder, judge, case.settings)
            started = time.perf_counter()
            record = answerer.ask(QUESTION)
            seconds = time.perf_counter() - started
            got, shown = classify(record)
            ok = got == case.expected and shown
            rows.append({"case": case.name, "expected": sorted(case.expected), "got": sorted(got),
                         "shown_inline": shown, "correct": ok, "seconds": round(seconds, 2),
                         "answer_requests": sum(1 for r in standin.requests if r.system != JUDGE_SYSTEM)})
            for sentence, quote_ok, supported in judge_pairs(record):
                pairs.append((case.name, sentence, quote_ok, supported))
            if case.name.startswith("judge only"):
                for item in record.claims.get("items", []):
                    judge_only.append((case.name, item["sentence"], item["supported"], item["reason"]))
            if record.claims:
                judge_cost.append({"calls": record.claims["calls"], "usage": record.claims["usage"],
                                   "latency_ms": record.claims["latency_ms"]})
    store.close()

    correct = sum(r["correct"] for r in rows)
    judged = [(c, s, qk, sup) for c, s, qk, sup in pairs if sup is not None]
    agree = sum(1 for _, _, qk, sup in judged if qk == sup)
    judge_kind = ("the real model (--live-judge)" if judge is not None else
                  f"the stand-in's word-overlap heuristic (>= {JUDGE_OVERLAP_MIN:.0%} of content words "
                  "in the cited passages), NOT a model")
    turns = len(judge_cost) or 1
    summary = {
        "cases": len(rows), "correct": correct, "share_correct": round(correct / len(rows), 4),
        "judge": judge_kind, "judge_pairs": len(judged), "judge_agreement": agree,
        "judge_agreement_share": round(agree / len(judged), 4) if judged else None,
        "judge_unjudged": len(pairs) - len(judged),
        "judge_per_turn": {
            "turns": len(judge_cost),
            "calls": round(sum(c["calls"] for c in judge_cost) / turns, 2),
            "input_tokens": round(sum(c["usage"].get("input_tokens", 0) for c in judge_cost) / turns),
            "output_tokens": round(sum(c["usage"].get("output_tokens", 0) for c in judge_cost) / turns),
            "latency_ms": round(sum(c["latency_ms"] for c in judge_cost) / turns, 1),
        },
    }
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary,
                          "judge_pairs": [{"case": c, "sentence": s, "quote_check": qk, "judge": sup}
                                          for c, s, qk, sup in pairs],
                          "judge_only": [{"case": c, "sentence": s, "supported": sup, "reason": r}
                                         for c, s, sup, r in judge_only]}, indent=2))
        return

    width = max(len(r["case"]) for r in rows)
    print(f"{'case':<{width}}  {'expected':<34} {'got':<34} inline  ok   s")
    for r in rows:
        print(f"{r['case']:<{width}}  {' + '.join(r['expected']):<34} {' + '.join(r['got']):<34} "
              f"{'yes' if r['shown_inline'] else 'NO':<6}  {'✓' if r['correct'] else '✗'}  {r['seconds']:.1f}")
    print(f"\nclassified correctly: {correct}/{len(rows)} ({correct / len(rows):.0%})")
    print(f"\nclaim judge: {judge_kind}")
    if judged:
        both_fail = sum(1 for _, _, qk, sup in judged if not qk and sup is False)
        both_pass = sum(1 for _, _, qk, sup in judged if qk and sup)
        print(f"agreement with the quote check on sentences both judged: {agree}/{len(judged)} "
              f"({agree / len(judged):.0%}): both passed {both_pass}, both failed {both_fail}, "
              f"disagreed {len(judged) - agree}; no verdict on {len(pairs) - len(judged)}")
    for case_name, sentence, quote_ok, supported in judged:
        if quote_ok != supported:
            print(f"  disagree [{case_name}] quote check {'passed' if quote_ok else 'failed'}, judge said "
                  f"{'supported' if supported else 'unsupported'}: {sentence[:90]}")
    print("judge only (no quotation, the deterministic checks cannot see these):")
    for case_name, sentence, supported, reason in judge_only:
        verdict = {True: "supported", False: "UNSUPPORTED", None: "no verdict"}[supported]
        print(f"  [{case_name}] {verdict}: {sentence[:70]} — {reason[:80]}")
    per = summary["judge_per_turn"]
    estimated = "" if judge is not None else " (stand-in token counts are estimates: chars / 4)"
    print(f"judge cost per answered turn ({per['turns']} turns): {per['calls']} calls, "
          f"{per['input_tokens']} input + {per['output_tokens']} output tokens{estimated}, "
          f"{per['latency_ms']} ms")


if __name__ == "__main__":
    main()
